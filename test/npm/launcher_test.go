// Package npm_test tests the npm package from the outside: the launcher
// that `npx withruntime` runs, and the tarballs of scripts/npm-pack.sh
// installed into an empty project and used against a real server.
package npm_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// requireNode skips (fails under CI, which installs Node) without node and npm.
func requireNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm", "npx"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI must have %s: %v", tool, err)
			}
			t.Skipf("needs %s: %v", tool, err)
		}
	}
}

func launcher() string {
	return filepath.Join(testenv.Root(), "sdk", "typescript", "bin", "withruntime.js")
}

// env is this process's environment without the variables the launcher
// reads, plus extra.
func env(extra ...string) []string {
	var e []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WITHRUNTIME_") {
			e = append(e, kv)
		}
	}
	return append(e, extra...)
}

// exitCode is the exit code of a finished command (-1 if a signal ended it).
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if ee != nil {
		return ee.ExitCode()
	}
	return 0
}

// hangGuard bounds a command that must end by itself: a broken launcher
// would otherwise hang the suite.
func hangGuard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestLauncherPassesArgumentsStdinAndExitCode(t *testing.T) {
	requireNode(t)
	cmd := exec.CommandContext(hangGuard(t), "node", launcher(),
		"-c", `printf '[%s]' "$@"; cat; echo oops >&2; exit 7`, "sh", "a b", "", "--", "--json")
	cmd.Env = env("WITHRUNTIME_BINARY=/bin/sh")
	cmd.Stdin = strings.NewReader("from stdin")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	code := exitCode(t, cmd.Run())
	if code != 7 {
		t.Errorf("exit code: got %d, want 7", code)
	}
	if got, want := out.String(), "[a b][][--][--json]from stdin"; got != want {
		t.Errorf("stdout: got %q, want %q", got, want)
	}
	if got, want := errb.String(), "oops\n"; got != want {
		t.Errorf("stderr: got %q, want %q", got, want)
	}
}

func TestLauncherDiesOfTheCLIsSignal(t *testing.T) {
	requireNode(t)
	cmd := exec.CommandContext(hangGuard(t), "node", launcher(), "-c", "kill -TERM $$")
	cmd.Env = env("WITHRUNTIME_BINARY=/bin/sh")
	err := cmd.Run()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the launcher ended with %v (%v), want death by SIGTERM like its child", cmd.ProcessState, err)
	}
}

// TestLauncherForwardsSIGTERM sends SIGTERM to the launcher only, as a
// supervisor or npm does: the CLI must get it and its exit code come back.
func TestLauncherForwardsSIGTERM(t *testing.T) {
	requireNode(t)
	cmd := exec.CommandContext(hangGuard(t), "node", launcher(), "-c",
		`trap 'echo got TERM; exit 42' TERM; echo ready; while :; do sleep 1; done`)
	cmd.Env = env("WITHRUNTIME_BINARY=/bin/sh")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		cmd.Process.Kill()
		t.Fatalf("first line: got %q, want ready", sc.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for sc.Scan() {
		rest = append(rest, sc.Text())
	}
	code := exitCode(t, cmd.Wait())
	if code != 42 {
		t.Errorf("exit code: got %d, want 42 (the child's trap)", code)
	}
	if got, want := strings.Join(rest, "\n"), "got TERM"; got != want {
		t.Errorf("output after the signal: got %q, want %q", got, want)
	}
}

// npmArch is Node's name for this machine's architecture.
func npmArch() string {
	if runtime.GOARCH == "amd64" {
		return "x64"
	}
	return runtime.GOARCH
}

func TestLauncherWithoutItsPlatformPackage(t *testing.T) {
	requireNode(t)
	// A copy of the package with no node_modules: as after
	// npm install --omit=optional.
	dir := t.TempDir()
	b, err := os.ReadFile(launcher())
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "withruntime.js"), b, 0o755)
	os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"withruntime","version":"9.8.7","type":"module"}`), 0o644)
	cmd := exec.CommandContext(hangGuard(t), "node", filepath.Join(dir, "bin", "withruntime.js"), "version")
	cmd.Env = env("WITHRUNTIME_BASE_URL=http://sandboxes.example:7878/")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if code := exitCode(t, cmd.Run()); code != 1 {
		t.Errorf("exit code: got %d, want 1", code)
	}
	// The platform packages are not on the registry: the message sends the
	// user to their server's.
	platform := runtime.GOOS + "-" + npmArch()
	pkg := "@withruntime/cli-" + platform
	for _, want := range []string{"the package " + pkg + " (version 9.8.7)", "is not installed",
		"npm install http://sandboxes.example:7878/sdk/npm/withruntime-cli-" + platform + ".tgz "} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr: got %q, want it to say %q", errb.String(), want)
		}
	}
	if out.Len() != 0 {
		t.Errorf("stdout: got %q, want nothing", out.String())
	}
}

func TestLauncherOnAnUnsupportedPlatform(t *testing.T) {
	requireNode(t)
	pre := filepath.Join(t.TempDir(), "arch.cjs")
	os.WriteFile(pre, []byte(`Object.defineProperty(process, "arch", { value: "ppc64" });`), 0o644)
	cmd := exec.CommandContext(hangGuard(t), "node", "-r", pre, launcher(), "version")
	cmd.Env = env()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if code := exitCode(t, cmd.Run()); code != 1 {
		t.Errorf("exit code: got %d, want 1", code)
	}
	want := "withruntime: there is no prebuilt withruntime CLI for " + runtime.GOOS + "-ppc64"
	if !strings.HasPrefix(errb.String(), want) || !strings.Contains(errb.String(), "WITHRUNTIME_BINARY") {
		t.Errorf("stderr: got %q, want it to start %q and name WITHRUNTIME_BINARY", errb.String(), want)
	}
}
