package layer

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestStoredOnce(t *testing.T) {
	s := openStore(t)
	data := newArchive().file(t, "a", "hello").file(t, "b/c", "world!").bytes(t)
	info, dir := mustImport(t, s, data, Overlay)
	if info.SizeBytes != 11 || info.Entries != 2 {
		t.Fatalf("Info %+v", info)
	}
	// The same archive again, twice at once: one layer.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			again, err := s.Import(context.Background(), bytes.NewReader(data), Overlay, Limits{})
			if err != nil || again != info {
				t.Errorf("again: %+v, %v; want %+v", again, err, info)
			}
		}()
	}
	wg.Wait()
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0] != info {
		t.Fatalf("List: %+v, %v", list, err)
	}
	entries, _ := os.ReadDir(s.tmp())
	if len(entries) != 0 {
		t.Fatalf("tmp holds %v", entries)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "b/c")); err != nil || string(b) != "world!" {
		t.Fatalf("b/c: %q, %v", b, err)
	}
	if st, err := s.Stat(info.Digest); err != nil || st != info {
		t.Fatalf("Stat: %+v, %v", st, err)
	}

	other, _ := mustImport(t, s, newArchive().file(t, "x", "123").bytes(t), OCI)
	if n, err := s.Usage(); err != nil || n != 14 {
		t.Fatalf("Usage: %d, %v; want 14", n, err)
	}
	if !s.Has(other.Digest) {
		t.Fatal("Has: false")
	}
	if err := s.Remove(other.Digest); err != nil {
		t.Fatal(err)
	}
	if s.Has(other.Digest) {
		t.Fatal("Has after Remove: true")
	}
	if err := s.Remove(other.Digest); err != nil {
		t.Fatalf("Remove again: %v", err)
	}
	if _, err := s.Dir(other.Digest); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Dir after Remove: %v", err)
	}
	if n, err := s.Usage(); err != nil || n != 11 {
		t.Fatalf("Usage: %d, %v; want 11", n, err)
	}
	entries, _ = os.ReadDir(s.tmp())
	if len(entries) != 0 {
		t.Fatalf("tmp holds %v", entries)
	}
}

func TestDigestsChecked(t *testing.T) {
	s := openStore(t)
	for _, d := range []string{"", "sha256:", "sha256:../../../etc", "sha256:" + strings.Repeat("A", 64), "sha512:" + strings.Repeat("a", 64), strings.Repeat("a", 64), "sha256:" + strings.Repeat("a", 63) + "/"} {
		if _, err := s.Dir(d); err == nil || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Dir(%q): %v, want a refusal", d, err)
		}
		if err := s.Remove(d); err == nil {
			t.Errorf("Remove(%q): no error", d)
		}
		if s.Has(d) {
			t.Errorf("Has(%q)", d)
		}
	}
}

func TestOpenRemovesHalfMade(t *testing.T) {
	cache := t.TempDir()
	s, err := Open(cache)
	if err != nil {
		t.Fatal(err)
	}
	info, dir := mustImport(t, s, newArchive().file(t, "kept", "k").bytes(t), Overlay)
	half := filepath.Join(s.digests(), strings.Repeat("b", 64))
	inflight := filepath.Join(s.tmp(), "import-123")
	for _, d := range []string{filepath.Join(half, "fs", "x"), filepath.Join(inflight, "fs", "y")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s, err = Open(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{half, inflight} {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there: %v", d, err)
		}
	}
	if got, err := s.Dir(info.Digest); err != nil || got != dir {
		t.Fatalf("the complete layer: %q, %v", got, err)
	}
	if s.Has("sha256:" + strings.Repeat("b", 64)) {
		t.Fatal("the half-made layer is listed")
	}
}
