package cli

import (
	"os"
	"testing"
)

// Without a Daemon hook (the CLI on macOS and Windows) a command that finds
// nothing on the default address says why, the way an unreachable server
// is reported, and leaves the data dir alone.
func TestNoLocalDaemon(t *testing.T) {
	const why = "the local daemon needs a Linux host; do this instead"
	tests := []struct {
		name     string
		noDaemon string
		args     []string
		wantCode int
		wantMsg  string // after "nothing answers on URL"
	}{
		{"explained, other command", why, []string{"sandbox", "ls"}, exitFailure, ", and " + why},
		{"explained, run", why, []string{"sandbox", "run", "--", "true"}, exitPlatform, ", and " + why},
		{"not explained", "", []string{"sandbox", "ls"}, exitFailure,
			` and this build cannot start the local daemon; run "withruntime serve" or set WITHRUNTIME_BASE_URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := useLocalDaemon(t)
			url := closedURL(t)
			app := &App{defaultBaseURL: url, Hooks: Hooks{NoDaemon: tt.noDaemon}}
			code, stdout, stderr := run(t, app, tt.args...)
			want := "error: unavailable: nothing answers on " + url + tt.wantMsg + "\n"
			if code != tt.wantCode || stdout != "" || stderr != want {
				t.Errorf("got %d %q %q, want %d, nothing and %q", code, stdout, stderr, tt.wantCode, want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("data dir %s: got %v, want it never made", dir, err)
			}
		})
	}
}
