package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// initArgvVar makes TestInitHelper run RunInit with the JSON argv it holds.
const initArgvVar = "WITHRUNTIME_TEST_INIT_ARGV"

func TestInitHelper(t *testing.T) {
	v := os.Getenv(initArgvVar)
	if v == "" {
		t.Skip("run by TestRunInit in a process of its own")
	}
	var argv []string
	if err := json.Unmarshal([]byte(v), &argv); err != nil {
		t.Fatal(err)
	}
	err := RunInit(argv)
	t.Fatalf("RunInit returned: %v", err)
}

// startInit runs RunInit(argv) in a new process.
func startInit(t *testing.T, argv ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	b, _ := json.Marshal(argv)
	cmd := exec.Command(os.Args[0], "-test.run=^TestInitHelper$")
	cmd.Env = append(os.Environ(), initArgvVar+"="+string(b))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(out)
}

func exitStatus(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

func TestRunInit(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name   string
		script string
		signal syscall.Signal // sent to init once the child printed "ready"; its trap is set by then
		want   int
	}{
		{name: "exit status", script: "echo ready; exit 7", want: 7},
		{name: "death by signal", script: "echo ready; kill -KILL $$", want: 128 + 9},
		{name: "forwards SIGTERM", script: `trap "exit 9" TERM; echo ready; while :; do sleep 0.02; done`, signal: syscall.SIGTERM, want: 9},
		{name: "forwards SIGINT", script: `trap "exit 8" INT; echo ready; while :; do sleep 0.02; done`, signal: syscall.SIGINT, want: 8},
		// The orphan's only reaper is init (a subreaper): it is a zombie
		// until init reaps it, and its /proc entry goes only then.
		{name: "reaps orphans", script: `(sleep 0.05 & echo $! > ` + filepath.Join(dir, "orphan") + `); echo ready; sleep 0.5; pid=$(cat ` + filepath.Join(dir, "orphan") + `); test -e /proc/$pid && exit 1; exit 0`, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, out := startInit(t, "/bin/sh", "-c", tt.script)
			line, err := out.ReadString('\n')
			if strings.TrimSpace(line) != "ready" {
				t.Fatalf("got %q, %v from the child, want ready", line, err)
			}
			if tt.signal != 0 {
				cmd.Process.Signal(tt.signal)
			}
			if got := exitStatus(t, cmd); got != tt.want {
				t.Errorf("got exit status %d, want %d", got, tt.want)
			}
		})
	}
}

func TestRunInitCannotStart(t *testing.T) {
	if err := RunInit([]string{"/nonexistent/agent", "serve"}); err == nil {
		t.Errorf("got no error starting a missing binary")
	}
	if err := RunInit(nil); err == nil {
		t.Errorf("got no error with no argv")
	}
}
