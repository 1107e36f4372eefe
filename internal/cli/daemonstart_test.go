package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/cli/localtrusttest"
)

// "daemon start" starts the local daemon as any command does when nothing
// answers, leaves an answering address be, and refuses another user's
// listener (the SDKs run it when they find nothing on the default address).
func TestDaemonStart(t *testing.T) {
	noSpawn := func(t *testing.T, why string) Hooks {
		return Hooks{Daemon: func() (string, error) {
			t.Errorf("started the local daemon although %s", why)
			return "", errors.New("no daemon in this test")
		}}
	}

	t.Run("something answers", func(t *testing.T) {
		useLocalDaemon(t)
		f := newFakeServer(t)
		app := &App{defaultBaseURL: f.URL, Hooks: noSpawn(t, "the default address answers")}
		code, stdout, stderr := run(t, app, "daemon", "start")
		if code != 0 || stdout != "" || !strings.Contains(stderr, "another server of this user answers on "+f.URL) {
			t.Errorf("got %d %q %q, want 0 and the note about the server there", code, stdout, stderr)
		}
	})

	t.Run("nothing answers", func(t *testing.T) {
		dir := useLocalDaemon(t)
		app := &App{defaultBaseURL: closedURL(t), Hooks: Hooks{Daemon: func() (string, error) { return "/bin/false", nil }}}
		code, _, stderr := run(t, app, "daemon", "start")
		if code != exitFailure {
			t.Errorf("exit: got %d, want %d", code, exitFailure)
		}
		// It did start one (which exited at once: /bin/false), and says so.
		for _, want := range []string{"started the local daemon", "error: unavailable: the local daemon exited", filepath.Join(dir, "daemon.log")} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr: got %q, want it to contain %q", stderr, want)
			}
		}
	})

	t.Run("no daemon in this build", func(t *testing.T) {
		useLocalDaemon(t)
		app := &App{defaultBaseURL: closedURL(t)}
		code, _, stderr := run(t, app, "daemon", "start")
		if code != exitFailure || !strings.Contains(stderr, "error: unavailable: nothing answers on http://127.0.0.1:") {
			t.Errorf("got %d %q, want %d and unavailable", code, stderr, exitFailure)
		}
	})

	t.Run("another user's listener", func(t *testing.T) {
		l := localtrusttest.Start(t, localtrusttest.Nobody)
		dir := useLocalDaemon(t)
		writeAdminKey(t, dir, "wr_local_admin", 0)
		app := &App{defaultBaseURL: l.URL, Hooks: noSpawn(t, "another user listens on the address")}
		code, _, stderr := run(t, app, "daemon", "start")
		want := fmt.Sprintf("error: forbidden: %s is held by process %d (listener) of user nobody (uid 65534)", l.Addr, l.Pid)
		if code != exitFailure || !strings.Contains(stderr, want) {
			t.Errorf("got %d %q, want %d and %q", code, stderr, exitFailure, want)
		}
		if got := l.Keyed(); len(got) != 0 {
			t.Errorf("the listener got keys %q", got)
		}
	})

	if code, _, _ := run(t, nil, "daemon", "start", "now"); code != exitUsage {
		t.Errorf("an argument: got %d, want %d", code, exitUsage)
	}
}
