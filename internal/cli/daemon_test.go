package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDaemonStatusWithoutDaemon(t *testing.T) {
	dir := useLocalDaemon(t)
	tests := []struct {
		name     string
		url      string
		wantNote bool
	}{
		{"nothing on the address", closedURL(t), false},
		{"another server on the address", newFakeServer(t).URL, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &App{defaultBaseURL: tt.url}
			code, stdout, stderr := run(t, app, "daemon", "status")
			if code != 0 || !strings.HasPrefix(stdout, "not running\n") || !strings.Contains(stdout, "data dir: "+dir+"\n") {
				t.Errorf("status: got %d %q %q, want 0, not running and the data dir", code, stdout, stderr)
			}
			if got := strings.Contains(stdout, "note: another server answers on "+tt.url); got != tt.wantNote {
				t.Errorf("status: got %q, want the note about another server %v", stdout, tt.wantNote)
			}
			code, stdout, stderr = run(t, app, "daemon", "status", "--json")
			var st map[string]any
			if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || st["running"] != false || st["data_dir"] != dir || st["address"] != tt.url {
				t.Errorf("status --json: got %d %q %q (%v)", code, stdout, stderr, err)
			}
			if h, _ := st["holder"].(string); strings.Contains(h, "another server answers on "+tt.url) != tt.wantNote {
				t.Errorf("status --json: holder %q, want the note about another server %v", h, tt.wantNote)
			}
			if code, _, stderr := run(t, app, "daemon", "stop"); code != 0 || !strings.Contains(stderr, "not running") {
				t.Errorf("stop: got %d %q, want 0 and not running", code, stderr)
			}
		})
	}
	if code, _, _ := run(t, nil, "daemon", "restart"); code != exitUsage {
		t.Errorf("unknown verb: got %d, want %d", code, exitUsage)
	}
}
