package cli

import (
	"strings"
	"testing"
)

func TestParseForward(t *testing.T) {
	tests := []struct {
		arg           string
		local, remote int
		bad           string
	}{
		{arg: "8000", local: 8000, remote: 8000},
		{arg: "18000:8000", local: 18000, remote: 8000},
		{arg: ":5432", local: 0, remote: 5432},
		{arg: "0:5432", local: 0, remote: 5432},
		{arg: "0", bad: `"0" is not a port`},
		{arg: "8000:", bad: `"" is not a port`},
		{arg: "8000:70000", bad: `"70000" is not a port`},
		{arg: "x:80", bad: `"x" is not a port`},
		{arg: "1:2:3", bad: `"2:3" is not a port`},
	}
	for _, tt := range tests {
		f, err := parseForward(tt.arg)
		if tt.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tt.bad) {
				t.Errorf("%q: got %+v, %v, want an error with %q", tt.arg, f, err, tt.bad)
			}
			continue
		}
		if err != nil || f.local != tt.local || f.remote != tt.remote {
			t.Errorf("%q: got %+v, %v, want %d:%d", tt.arg, f, err, tt.local, tt.remote)
		}
	}
}

// Usage errors are said before anything is sent (the address is closed).
func TestPreviewVerbsUsage(t *testing.T) {
	t.Setenv("WITHRUNTIME_BASE_URL", "http://127.0.0.1:1")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sandbox", "port-forward", "sbx_a"}, "want a sandbox ID and at least one LOCAL:REMOTE"},
		{[]string{"sandbox", "port-forward", "sbx_a", "8000:x"}, `"x" is not a port`},
		{[]string{"sandbox", "expose", "sbx_a"}, "want a sandbox ID and a PORT"},
		{[]string{"sandbox", "expose", "sbx_a", "8000", "--public", "--private"}, "cannot go together"},
		{[]string{"sandbox", "expose", "sbx_a", "99999"}, `"99999" is not a port`},
		{[]string{"sandbox", "preview-url", "sbx_a", "0"}, `"0" is not a port`},
		{[]string{"sandbox", "preview-url", "sbx_a", "80", "--expires-in", "-5"}, "must be positive"},
		{[]string{"sandbox", "preview-revoke"}, "want one sandbox ID"},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(t, nil, tt.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: got exit %d stdout %q stderr %q, want 2 and %q", tt.args, code, stdout, stderr, tt.want)
		}
	}
}
