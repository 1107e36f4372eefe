package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets the tests run this test binary as the withruntime command,
// so they see what main really does with exit codes.
func TestMain(m *testing.M) {
	if os.Getenv("WITHRUNTIME_TEST_AS_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestExitCodes(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"version", []string{"version"}, 0, "withruntime 0.0.0-dev\n", ""},
		{"usage error", []string{"sandbox", "run"}, 2, "", "usage: withruntime sandbox run"},
		{"unreachable, other command", []string{"sandbox", "ls"}, 1, "", "error: unavailable: GET " + closed},
		{"unreachable, run", []string{"sandbox", "run", "--", "true"}, 125, "", "error: unavailable: POST " + closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tt.args...)
			cmd.Env = append(os.Environ(), "WITHRUNTIME_TEST_AS_MAIN=1", "WITHRUNTIME_BASE_URL="+closed)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode {
				t.Errorf("exit code: got %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if stdout.String() != tt.wantStdout {
				t.Errorf("stdout: got %q, want %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr: got %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}
