package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// crossTargets are the platforms the CLI ships for (the npm package's
// platform packages), built statically.
var crossTargets = []struct{ goos, goarch string }{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"},
}

// clientOnlyDeps are the module's packages a build without the server may
// link: the command line and the client (with the environment-name rule
// the wire shares, internal/envname), nothing of the host's.
var clientOnlyDeps = []string{"api", "client", "internal/cli", "internal/mcptools", "internal/buildinfo", "internal/tarx", "internal/envname", "cmd/withruntime"}

// TestCrossBuild builds the CLI for every shipped platform, vets the
// client side for macOS and Windows, fences what those builds link, and
// runs a Linux build made the way those are (tag withruntime_hostless):
// its serve and setup refuse, with the help of the real ones.
func TestCrossBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross builds take a minute or two")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	goCmd := func(goos, goarch string, args ...string) (string, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var native string
	for _, tg := range crossTargets {
		bin := filepath.Join(tmp, "withruntime-"+tg.goos+"-"+tg.goarch)
		if tg.goos == "windows" {
			bin += ".exe"
		}
		start := time.Now()
		if out, err := goCmd(tg.goos, tg.goarch, "build", "-o", bin, "./cmd/withruntime"); err != nil {
			t.Errorf("%s/%s: go build: %v\n%s", tg.goos, tg.goarch, err, out)
			continue
		}
		t.Logf("%s/%s: built in %v", tg.goos, tg.goarch, time.Since(start).Round(100*time.Millisecond))
		if tg.goos == runtime.GOOS && tg.goarch == runtime.GOARCH {
			native = bin
		}
	}
	for _, goos := range []string{"darwin", "windows"} {
		if out, err := goCmd(goos, "amd64", "vet", "./cmd/withruntime/...", "./client/..."); err != nil {
			t.Errorf("%s: go vet: %v\n%s", goos, err, out)
		}
		out, err := goCmd(goos, "amd64", "list", "-deps", "-f", "{{.ImportPath}}", "./cmd/withruntime")
		if err != nil {
			t.Fatalf("%s: go list: %v\n%s", goos, err, out)
		}
		for _, p := range strings.Fields(out) {
			if rest, ok := strings.CutPrefix(p, "github.com/withruntime/withruntime/"); ok && !slices.Contains(clientOnlyDeps, rest) {
				t.Errorf("%s: the CLI links %s, want only %v of this module", goos, p, clientOnlyDeps)
			}
		}
	}
	if runtime.GOOS != "linux" || native == "" {
		return
	}
	hostless := filepath.Join(tmp, "withruntime-hostless")
	if out, err := goCmd("linux", runtime.GOARCH, "build", "-tags", "withruntime_hostless", "-o", hostless, "./cmd/withruntime"); err != nil {
		t.Fatalf("hostless: go build: %v\n%s", err, out)
	}
	for _, name := range []string{"serve", "setup"} {
		want, _, _ := runBin(t, native, name, "--help")
		if got, stderr, code := runBin(t, hostless, name, "--help"); got != want || code != 0 {
			t.Errorf("hostless %s --help: got %d %q %q, want 0 and the Linux build's %q", name, code, got, stderr, want)
		}
		wantErr := "error: not_supported: withruntime " + name + " needs a Linux host; on this machine point the CLI at a server with WITHRUNTIME_BASE_URL (and WITHRUNTIME_API_KEY)\n"
		if stdout, stderr, code := runBin(t, hostless, name); code != 1 || stdout != "" || stderr != wantErr {
			t.Errorf("hostless %s: got %d %q %q, want 1, nothing and %q", name, code, stdout, stderr, wantErr)
		}
	}
}

// runBin runs bin with args and returns its stdout, stderr and exit code.
func runBin(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}
