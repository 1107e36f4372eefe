package build

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const parent = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

// TestCacheKeyGolden pins the encoding: a key that changes between
// releases would make every cached step miss (or, worse, a new meaning
// match an old key). Change the version string with the encoding. The
// value was computed apart from this code (Python: sha256 over the
// netstrings of the documented fields).
func TestCacheKeyGolden(t *testing.T) {
	got := CacheKey(parent, Step{Run: "echo hi", User: "root"}, nil)
	const want = "sha256:976534f05076901958502085ad2b010b2a361fff66e7861b0a7afc6e1e9fabbb"
	if got != want {
		t.Errorf("CacheKey = %s, want %s", got, want)
	}
}

func TestCacheKeyChanges(t *testing.T) {
	files := map[string]string{"app": "d1", "app/main.py": "f1", "other.txt": "f2"}
	cp := func(mut func(*Copy)) Step {
		c := Copy{Src: "app", Dest: "/srv/app", User: "user"}
		if mut != nil {
			mut(&c)
		}
		return Step{Copy: &c}
	}
	base := CacheKey(parent, cp(nil), files)
	if again := CacheKey(parent, cp(nil), map[string]string{"app": "d1", "app/main.py": "f1", "other.txt": "f2"}); again != base {
		t.Fatalf("the same step and files gave %s and %s", base, again)
	}
	if got := CacheKey(parent, cp(func(c *Copy) { c.Src = "app/" }), files); got != base {
		t.Errorf("src with a trailing slash changed the key")
	}
	changed := map[string]string{
		"parent":       CacheKey(parent+"2", cp(nil), files),
		"dest":         CacheKey(parent, cp(func(c *Copy) { c.Dest = "/srv/b" }), files),
		"user":         CacheKey(parent, cp(func(c *Copy) { c.User = "root" }), files),
		"mode":         CacheKey(parent, cp(func(c *Copy) { c.Mode = "0755" }), files),
		"file content": CacheKey(parent, cp(nil), map[string]string{"app": "d1", "app/main.py": "f9", "other.txt": "f2"}),
		"file added":   CacheKey(parent, cp(nil), map[string]string{"app": "d1", "app/main.py": "f1", "app/new": "f3", "other.txt": "f2"}),
		"file renamed": CacheKey(parent, cp(nil), map[string]string{"app": "d1", "app/mian.py": "f1", "other.txt": "f2"}),
	}
	for what, k := range changed {
		if k == base {
			t.Errorf("changing the %s left the key as it was", what)
		}
	}
	unrelated := map[string]string{"app": "d1", "app/main.py": "f1", "other.txt": "CHANGED", "application": "x", "ap": "y"}
	if got := CacheKey(parent, cp(nil), unrelated); got != base {
		t.Errorf("a change outside the copy's src (other.txt, application, ap) changed the key")
	}

	// Every kind: a change of any field changes the key, and kinds with the
	// same text do not collide.
	steps := []Step{
		{AptInstall: []string{"git"}},
		{AptInstall: []string{"git", "curl"}},
		{AptInstall: []string{"gitcurl"}},
		{PipInstall: []string{"git"}},
		{NpmInstall: []string{"git"}},
		{NpmInstall: []string{"git"}, Global: true},
		{Run: "git"},
		{Run: "git", User: "root"},
		{Run: "git", User: "user"},
		{Env: map[string]string{"A": "1"}},
		{Env: map[string]string{"A": "2"}},
		{Env: map[string]string{"A": "1", "B": "1"}},
		{Env: map[string]string{"A1": ""}},
		{Workdir: "/git"},
		{User: "git"},
	}
	seen := map[string]int{}
	for i, s := range steps {
		k := CacheKey(parent, s, nil)
		if j, ok := seen[k]; ok {
			t.Errorf("steps %d and %d have the same key", j, i)
		}
		seen[k] = i
		if CacheKey(parent, s, nil) != k {
			t.Errorf("step %d: two keys for one step", i)
		}
	}
	if CacheKey(parent, Step{Env: map[string]string{"A": "1", "B": "2"}}, nil) != CacheKey(parent, Step{Env: map[string]string{"B": "2", "A": "1"}}, nil) {
		t.Error("an env step's key depends on map order")
	}
}

func write(t *testing.T, dir, name, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func TestHashContext(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "app/main.py", "print(1)\n", 0o644)
	write(t, dir, "app/lib/util.py", "x = 1\n", 0o644)
	write(t, dir, "README", "hello\n", 0o644)
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "app/passwd")); err != nil {
		t.Fatal(err)
	}
	step := Step{Copy: &Copy{Src: "app", Dest: "/srv"}}
	key := func() string {
		t.Helper()
		files, err := HashContext(dir, "app", DefaultContextLimits)
		if err != nil {
			t.Fatal(err)
		}
		return CacheKey(parent, step, files)
	}
	files, err := HashContext(dir, "app", DefaultContextLimits)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"app", "app/main.py", "app/lib", "app/lib/util.py", "app/passwd"} {
		if files[p] == "" {
			t.Errorf("no digest for %s in %v", p, files)
		}
	}
	if len(files) != 5 {
		t.Errorf("HashContext(app) = %d entries, want 5: %v", len(files), files)
	}
	// The symlink is hashed as its target's text, never followed: the
	// passwd file's content is not what its digest covers.
	if files["app/passwd"] != entryDigest("symlink", "777", "/etc/passwd") {
		t.Errorf("the symlink's digest is not that of its target's name")
	}
	all, err := HashContext(dir, ".", DefaultContextLimits)
	if err != nil || all["README"] == "" || all["."] == "" || all["app/main.py"] != files["app/main.py"] {
		t.Errorf("HashContext(.) = %v, %v", all, err)
	}

	k0 := key()
	if key() != k0 {
		t.Fatal("two hashes of one context differ")
	}
	write(t, dir, "README", "changed\n", 0o644)
	if key() != k0 {
		t.Error("a file outside the copy's src changed its key")
	}
	write(t, dir, "app/main.py", "print(2)\n", 0o644)
	k1 := key()
	if k1 == k0 {
		t.Error("a copied file's content changed and the key did not")
	}
	write(t, dir, "app/main.py", "print(2)\n", 0o755)
	k2 := key()
	if k2 == k1 {
		t.Error("a copied file's mode changed and the key did not")
	}
	os.Remove(filepath.Join(dir, "app/passwd"))
	os.Symlink("/etc/shadow", filepath.Join(dir, "app/passwd"))
	if key() == k2 {
		t.Error("a copied symlink's target changed and the key did not")
	}
}

func TestHashContextRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a/1", "x", 0o644)
	write(t, dir, "a/2", "yy", 0o644)
	write(t, dir, "a/3", "zzz", 0o644)
	if err := os.Symlink("..", filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(dir, "slash")); err != nil {
		t.Fatal(err)
	}
	if _, err := HashContext(dir, "a", ContextLimits{MaxEntries: 3, MaxBytes: 1 << 20}); !errors.Is(err, ErrContextLimit) {
		t.Errorf("4 entries under a bound of 3: %v, want ErrContextLimit", err)
	}
	if _, err := HashContext(dir, "a", ContextLimits{MaxEntries: 100, MaxBytes: 5}); !errors.Is(err, ErrContextLimit) {
		t.Errorf("6 bytes under a bound of 5: %v, want ErrContextLimit", err)
	}
	if _, err := HashContext(dir, "a", ContextLimits{MaxEntries: 4, MaxBytes: 6}); err != nil {
		t.Errorf("exactly at the bounds: %v", err)
	}
	// A path through a symlink that leads out of the context is refused
	// by the os.Root; the symlinks themselves hash as symlinks.
	for _, src := range []string{"up/etc", "slash/etc/passwd", "up"} {
		files, err := HashContext(dir, src, DefaultContextLimits)
		if src == "up" {
			if err != nil || len(files) != 1 || files["up"] != entryDigest("symlink", "777", "..") {
				t.Errorf("HashContext(up) = %v, %v; want the symlink alone", files, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("HashContext(%s) = %v, want a refusal", src, files)
		}
	}
	if _, err := HashContext(dir, "../x", DefaultContextLimits); err == nil {
		t.Error("a src out of the context was taken")
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "a/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := HashContext(dir, "a", DefaultContextLimits)
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "not a file, directory or symlink") {
		t.Errorf("a FIFO in the context: %v", err)
	}
}
