package server

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The E2B secret is made once, private, and kept across starts.
func TestE2BSecret(t *testing.T) {
	dir := t.TempDir()
	first, err := e2bSecret(dir)
	if err != nil || len(first) != 32 {
		t.Fatalf("got %d bytes, %v, want 32", len(first), err)
	}
	fi, err := os.Stat(filepath.Join(dir, "e2b.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("e2b.key: got %v, %v, want mode 0600", fi, err)
	}
	again, err := e2bSecret(dir)
	if err != nil || !bytes.Equal(again, first) {
		t.Errorf("second start: got a different secret (%v), want the same", err)
	}
	os.WriteFile(filepath.Join(dir, "e2b.key"), []byte("short"), 0o600)
	if _, err := e2bSecret(dir); err == nil {
		t.Errorf("a 5-byte e2b.key: got no error, want one")
	}
}
