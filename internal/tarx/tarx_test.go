package tarx

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// TestName pins the one name check both the client and the agent use: the
// stricter of the two checks each had.
func TestName(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "a/b", want: "a/b"},
		{in: "./a//b/", want: "a/b"},
		{in: "./", want: ""},
		{in: ".", want: ""},
		{in: "a/./b", want: "a/b"},
		{in: "..a/b..", want: "..a/b.."},
		{in: "", wantErr: true},
		{in: "a\x00b", wantErr: true},
		{in: "/etc/passwd", wantErr: true},
		{in: "a/../b", wantErr: true},
		{in: "..", wantErr: true},
		{in: "a/..", wantErr: true},
	}
	for _, tt := range tests {
		got, err := Name(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Name(%q): got %q, %v, want %q (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, ErrUnsafe) {
			t.Errorf("Name(%q): got %v, want ErrUnsafe", tt.in, err)
		}
	}
}

type entry struct {
	name, body, link string
	typ              byte
}

func archive(t *testing.T, entries ...entry) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Mode: 0o640}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(buf.Bytes())
}

// TestPolicies checks what each policy does with what is already at an
// entry's name: a download (no Owner) refuses a file onto a symbolic link
// and keeps an existing file's identity; an upload replaces the link.
// Neither ever writes through a link, and both refuse a device.
func TestPolicies(t *testing.T) {
	for _, upload := range []bool{false, true} {
		dir := t.TempDir()
		outside := filepath.Join(t.TempDir(), "outside")
		if err := os.WriteFile(outside, []byte("outside"), 0o600); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		var opts Options
		if upload {
			opts.Owner = &Owner{UID: os.Getuid(), GID: os.Getgid()}
		}
		err = NewReader(archive(t, entry{name: "l", typ: tar.TypeSymlink, link: outside}, entry{name: "l", body: "pwned"}), opts).Extract(root, nil, "")
		if upload {
			if err != nil {
				t.Fatalf("upload: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "l")); string(b) != "pwned" {
				t.Errorf("upload: got %q at l, want the file replacing the link", b)
			}
		} else if !errors.Is(err, ErrUnsafe) {
			t.Errorf("download: got %v, want ErrUnsafe", err)
		}
		if b, _ := os.ReadFile(outside); string(b) != "outside" {
			t.Errorf("upload %v: wrote through the link: %q", upload, b)
		}
		x := NewReader(archive(t, entry{name: "ok", body: "x"}, entry{name: "sub/fifo", typ: tar.TypeFifo}), opts)
		if err := x.Extract(root, nil, ""); !errors.Is(err, ErrUnsafe) {
			t.Errorf("upload %v: got %v for a FIFO, want ErrUnsafe", upload, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "sub")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("upload %v: the refused entry left its parent: %v", upload, err)
		}
		if x.Files != 1 || x.Entries != 2 {
			t.Errorf("upload %v: got %+v, want 1 file of 2 entries", upload, x.Stats)
		}
	}
}

// TestBounds checks the entry and byte bounds refuse with ErrTooLarge.
func TestBounds(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	err = NewReader(archive(t, entry{name: "a", body: "x"}, entry{name: "b", body: "y"}), Options{MaxEntries: 1}).Extract(root, nil, "")
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("entries: got %v, want ErrTooLarge", err)
	}
	err = NewReader(archive(t, entry{name: "c", body: "xyz"}), Options{MaxBytes: 2}).Extract(root, nil, "")
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("bytes: got %v, want ErrTooLarge", err)
	}
	err = NewReader(archive(t, entry{name: "d", body: "xyz"}), Options{MaxEntrySize: 2}).Extract(root, nil, "")
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("entry size: got %v, want ErrMalformed", err)
	}
}

// FuzzName checks what Name lets through is clean, relative and local
// whatever the archive spells: never "..", never absolute, never a NUL.
func FuzzName(f *testing.F) {
	for _, s := range []string{"a/b", "./", "../x", "a/../../b", "/etc", "a\x00b", "a//b/./c/", ".."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		name, err := Name(raw)
		if err != nil || name == "" {
			return
		}
		if name != path.Clean(name) || !filepath.IsLocal(filepath.FromSlash(name)) || strings.IndexByte(name, 0) >= 0 {
			t.Errorf("Name(%q) = %q: not clean and local", raw, name)
		}
		for _, part := range strings.Split(name, "/") {
			if part == ".." || part == "." || part == "" {
				t.Errorf("Name(%q) = %q: has %q", raw, name, part)
			}
		}
	})
}
