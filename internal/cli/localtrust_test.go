package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/cli/localtrusttest"
)

// Another user listening on the default address while no daemon runs: the
// commands send it no key, say whose process holds the port, and start no
// daemon over it; "daemon status" names it too. A listener of the admin
// key file's owner still gets the key.
func TestDefaultAddressHeldByAnotherUser(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		keyOwner  int  // of admin.key; -1: no key file
		wantOK    bool // exit 0
		wantKeyed []string
		wantOut   string // in stdout (with %s the address, %d the pid)
		wantErr   string // in stderr
	}{
		{"run", []string{"sandbox", "run", "--", "true"}, 0, false, nil, "",
			"error: forbidden: %s is held by process %d (listener) of user nobody (uid 65534), not by the local daemon of user root (uid 0)"},
		{"ls", []string{"sandbox", "ls"}, 0, false, nil, "",
			"error: forbidden: %s is held by process %d (listener) of user nobody (uid 65534)"},
		{"ls, no key yet", []string{"sandbox", "ls"}, -1, false, nil, "",
			"error: forbidden: %s is held by process %d (listener) of user nobody (uid 65534)"},
		{"daemon status", []string{"daemon", "status"}, 0, true, nil,
			"note: %s is held by process %d (listener) of user nobody (uid 65534)", ""},
		{"the key owner's listener", []string{"sandbox", "ls"}, localtrusttest.Nobody, true,
			[]string{"Bearer wr_local_admin"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := localtrusttest.Start(t, localtrusttest.Nobody)
			dir := useLocalDaemon(t)
			if tt.keyOwner >= 0 {
				writeAdminKey(t, dir, "wr_local_admin", tt.keyOwner)
			}
			started := false
			app := &App{defaultBaseURL: l.URL, Hooks: Hooks{Daemon: func() (string, error) {
				started = true
				return "", errors.New("no daemon in this test")
			}}}
			code, stdout, stderr := run(t, app, tt.args...)
			if (code == 0) != tt.wantOK {
				t.Errorf("exit: got %d (%q), want success %v", code, stderr, tt.wantOK)
			}
			fill := func(s string) string {
				return strings.ReplaceAll(strings.ReplaceAll(s, "%s", l.Addr), "%d", fmt.Sprint(l.Pid))
			}
			if w := fill(tt.wantErr); !strings.Contains(stderr, w) {
				t.Errorf("stderr: got %q, want it to contain %q", stderr, w)
			}
			if w := fill(tt.wantOut); !strings.Contains(stdout, w) {
				t.Errorf("stdout: got %q, want it to contain %q", stdout, w)
			}
			if got := l.Keyed(); fmt.Sprint(got) != fmt.Sprint(tt.wantKeyed) {
				t.Errorf("keys the listener saw: got %q, want %q", got, tt.wantKeyed)
			}
			if started {
				t.Error("started a daemon over another user's listener")
			}
		})
	}
}

// writeAdminKey writes the daemon's admin key into dir, owned by uid.
func writeAdminKey(t *testing.T, dir, key string, uid int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "admin.key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}
