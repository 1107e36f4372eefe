package server

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The E2B secret is made once, private, and kept across starts.
func TestE2BSecret(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "e2b.key")
	// A leftover temporary file, readable by all, does not make the key so.
	os.WriteFile(key+".tmp", []byte("old"), 0o666)
	os.Chmod(key+".tmp", 0o666)
	first, err := e2bSecret(dir)
	if err != nil || len(first) != 32 {
		t.Fatalf("got %d bytes, %v, want 32", len(first), err)
	}
	fi, err := os.Lstat(key)
	if err != nil || fi.Mode() != 0o600 {
		t.Fatalf("e2b.key: got %v, %v, want a regular file of mode 0600", fi, err)
	}
	if _, err := os.Stat(key + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("e2b.key.tmp: got %v, want it gone", err)
	}
	again, err := e2bSecret(dir)
	if err != nil || !bytes.Equal(again, first) {
		t.Errorf("second start: got a different secret (%v), want the same", err)
	}
}

// An e2b.key that is not a private regular file of 32 bytes is refused,
// and left as it is.
func TestE2BSecretRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(key string)
		want string
	}{
		{"short", func(key string) { os.WriteFile(key, []byte("short"), 0o600) }, "is 5 bytes, want 32"},
		{"readable by others", func(key string) {
			os.WriteFile(key, bytes.Repeat([]byte{1}, 32), 0o644)
			os.Chmod(key, 0o644)
		}, "has mode 0644"},
		{"writable by the group", func(key string) {
			os.WriteFile(key, bytes.Repeat([]byte{1}, 32), 0o620)
			os.Chmod(key, 0o620)
		}, "has mode 0620"},
		{"a symbolic link", func(key string) {
			os.WriteFile(key+".real", bytes.Repeat([]byte{1}, 32), 0o600)
			os.Symlink(key+".real", key)
		}, "is a symbolic link"},
		{"a directory", func(key string) { os.Mkdir(key, 0o700) }, "is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			key := filepath.Join(dir, "e2b.key")
			tc.make(key)
			before, _ := os.Lstat(key)
			_, err := e2bSecret(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
			if after, _ := os.Lstat(key); after == nil || after.Mode() != before.Mode() || after.Size() != before.Size() {
				t.Errorf("e2b.key changed: got %v, want it as it was (%v)", after, before)
			}
		})
	}
}
