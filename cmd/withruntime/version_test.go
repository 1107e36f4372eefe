package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A built binary reports its build's version: one set by -ldflags -X, else
// the commit it was built from (with -trimpath too, as scripts/up.sh builds):
// Go 1.24 and later stamp a pseudo-version of the commit, older ones leave
// "(devel)" and buildinfo names the commit.
func TestVersionOfABuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	build := func(name string, args ...string) string {
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", append(append([]string{"build", "-trimpath", "-o", bin}, args...), ".")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", args, err, out)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("%s version: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := build("set", "-ldflags", "-X main.version=v1.2.3"); got != "withruntime v1.2.3" {
		t.Errorf("set by -ldflags: got %q", got)
	}
	want := regexp.MustCompile(`^withruntime (v\d+\.\d+\.\d+-(0\.)?\d{14}-[0-9a-f]{12}(\+dirty)?|0\.0\.0-dev\+[0-9a-f]{12}(-dirty)?)$`)
	if _, err := exec.LookPath("git"); err != nil {
		want = regexp.MustCompile(`^withruntime 0\.0\.0-dev`)
	}
	if got := build("checkout", "-buildvcs=true"); !want.MatchString(got) {
		t.Errorf("built from a checkout: got %q, want it to match %s", got, want)
	}
}
