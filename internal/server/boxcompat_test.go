package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/backend/microvm"
)

// TestBoxCompat: a single box's compat changes with the runsc build (its
// pinned version, its size or its time) and the guest kernel of the
// microVMs, and stays the same otherwise, so
// a snapshot taken before an upgrade is refused after it.
func TestBoxCompat(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(cache, "bin")
	os.MkdirAll(bin, 0o755)
	runsc := filepath.Join(bin, "runsc")
	os.WriteFile(runsc, []byte("runsc one"), 0o755)
	os.WriteFile(runsc+".version", []byte("v1\n"), 0o644)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	os.Chtimes(runsc, at, at)
	first := boxCompat(cache)
	if again := boxCompat(cache); again != first {
		t.Fatalf("the same host: %s then %s", first, again)
	}
	seen := map[string]string{first: "first"}
	for name, change := range map[string]func(){
		"version": func() { os.WriteFile(runsc+".version", []byte("v2\n"), 0o644) },
		"bytes":   func() { os.WriteFile(runsc, []byte("runsc two, longer"), 0o755); os.Chtimes(runsc, at, at) },
		"time":    func() { os.Chtimes(runsc, at.Add(time.Hour), at.Add(time.Hour)) },
		"guest kernel": func() {
			dir := microvm.KernelDir(cache)
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "current"), []byte("6.1.0-58-cloud-amd64\n"), 0o644)
		},
	} {
		change()
		got := boxCompat(cache)
		if other, dup := seen[got]; dup {
			t.Fatalf("after a change of the runsc build's %s, compat is %s's", name, other)
		}
		seen[got] = name
	}
}
