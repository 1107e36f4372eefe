package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With WITHRUNTIME_DAEMON_E2B_LISTEN set, the local daemon is started with
// --e2b-listen; without it, with no such flag.
func TestDaemonE2BListen(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:3999", ""} {
		useLocalDaemon(t)
		t.Setenv(EnvDaemonE2BListen, listen)
		dir := t.TempDir()
		out := filepath.Join(dir, "args")
		exe := filepath.Join(dir, "fake-withruntime")
		if err := os.WriteFile(exe, []byte("#!/bin/sh\necho \"$@\" > "+out+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		app := &App{defaultBaseURL: closedURL(t), Hooks: Hooks{Daemon: func() (string, error) { return exe, nil }}}
		run(t, app, "sandbox", "ls") // the fake daemon exits: the command fails
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("%q: the daemon was not started: %v", listen, err)
		}
		args := string(b)
		if has := strings.Contains(args, "--e2b-listen"); has != (listen != "") || listen != "" && !strings.Contains(args, "--e2b-listen "+listen) {
			t.Errorf("%s=%q: got serve args %q", EnvDaemonE2BListen, listen, args)
		}
	}
}
