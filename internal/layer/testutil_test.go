package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// archive writes a tar archive in a test: the hostile ones included.
type archive struct {
	buf bytes.Buffer
	tw  *tar.Writer
}

func newArchive() *archive {
	a := &archive{}
	a.tw = tar.NewWriter(&a.buf)
	return a
}

var mtime = time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)

// add writes hdr and body; a regular file's size is body's unless set,
// its time mtime unless set.
func (a *archive) add(t *testing.T, hdr *tar.Header, body string) *archive {
	t.Helper()
	if hdr.Typeflag == tar.TypeReg && hdr.Size == 0 {
		hdr.Size = int64(len(body))
	}
	if hdr.ModTime.IsZero() {
		hdr.ModTime = mtime
	}
	if err := a.tw.WriteHeader(hdr); err != nil {
		t.Fatal(err)
	}
	if body != "" {
		if _, err := a.tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func (a *archive) file(t *testing.T, name, body string) *archive {
	return a.add(t, &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, body)
}

func (a *archive) dir(t *testing.T, name string) *archive {
	return a.add(t, &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}, "")
}

func (a *archive) symlink(t *testing.T, name, target string) *archive {
	return a.add(t, &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}, "")
}

func (a *archive) hardlink(t *testing.T, name, target string) *archive {
	return a.add(t, &tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target, Mode: 0o644}, "")
}

func (a *archive) bytes(t *testing.T) []byte {
	t.Helper()
	if err := a.tw.Close(); err != nil {
		t.Fatal(err)
	}
	return a.buf.Bytes()
}

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mustImport imports data and returns the layer's fs directory.
func mustImport(t *testing.T, s *Store, data []byte, f Format) (Info, string) {
	t.Helper()
	info, err := s.Import(context.Background(), bytes.NewReader(data), f, Limits{})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	sum := sha256.Sum256(data)
	if want := "sha256:" + hex.EncodeToString(sum[:]); info.Digest != want {
		t.Fatalf("digest %s, want %s", info.Digest, want)
	}
	dir, err := s.Dir(info.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return info, dir
}

// refused imports data, wants an error of kind, and checks that nothing
// of the import is left in the store.
func refused(t *testing.T, s *Store, data []byte, f Format, lim Limits, kind error) error {
	t.Helper()
	_, err := s.Import(context.Background(), bytes.NewReader(data), f, lim)
	if !errors.Is(err, kind) {
		t.Fatalf("Import: %v, want an error that is %v", err, kind)
	}
	assertEmpty(t, s)
	return err
}

// assertEmpty checks the store holds no layer and no import in progress.
func assertEmpty(t *testing.T, s *Store) {
	t.Helper()
	for _, d := range []string{s.digests(), s.tmp()} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			t.Errorf("left behind: %s", filepath.Join(d, e.Name()))
		}
	}
}

// assertNoEntries checks the directory dir is still empty.
func assertNoEntries(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("written outside the layer: %s", filepath.Join(dir, e.Name()))
	}
}

func lstatT(t *testing.T, name string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(name, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func xattrs(t *testing.T, name string) []string {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(name, buf)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bytes.Split(buf[:n], []byte{0}) {
		if len(b) > 0 {
			out = append(out, string(b))
		}
	}
	return out
}

func isOpaque(t *testing.T, dir string) bool {
	t.Helper()
	ok, err := rootOpaque(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
