package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyFollowsRecipe(t *testing.T) {
	a := Default
	b := Default
	b.Packages = append(append([]string{}, Default.Packages...), "vim")
	if a.Key() != Default.Key() {
		t.Fatalf("same recipe, different keys")
	}
	if a.Key() == b.Key() {
		t.Fatalf("got the same key for different recipes")
	}
}

func TestArgsNameNoMirror(t *testing.T) {
	args := Default.Args("/out.tar")
	if got := args[len(args)-2:]; got[0] != "trixie" || got[1] != "/out.tar" {
		t.Fatalf("got suite and target %q, want trixie /out.tar", got)
	}
	for _, a := range args {
		if strings.Contains(a, "http") {
			t.Fatalf("argument names a host: %q", a)
		}
	}
}

func TestRootfsNeedsCompleteBuild(t *testing.T) {
	cache := t.TempDir()
	if _, err := Rootfs(cache, DefaultName); err == nil || !strings.Contains(err.Error(), "withruntime setup") {
		t.Fatalf("got %v, want an error that says to run setup", err)
	}
	dir := Dir(cache, Default)
	os.MkdirAll(filepath.Join(dir, "rootfs"), 0o755)
	os.WriteFile(filepath.Join(dir, completeMark), nil, 0o644)
	got, err := Rootfs(cache, DefaultName)
	if err != nil || got != filepath.Join(dir, "rootfs") {
		t.Fatalf("got %q, %v; want the rootfs dir", got, err)
	}
	if _, err := Rootfs(cache, "ubuntu"); err == nil {
		t.Fatalf("got no error for an unknown image")
	}
}

func TestDefaultBuildsSoftware(t *testing.T) {
	have := map[string]bool{}
	for _, p := range Default.Packages {
		have[p] = true
	}
	for _, p := range []string{"python3", "nodejs", "npm", "golang-go", "build-essential", "sqlite3", "unzip", "jq", "less"} {
		if !have[p] {
			t.Errorf("default recipe lacks %s", p)
		}
	}
	if inc := Default.Args("/out.tar")[1]; !strings.Contains(inc, ",golang-go,") {
		t.Fatalf("got %q, want golang-go in --include", inc)
	}
}
