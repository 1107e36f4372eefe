package agent

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzExtract extracts arbitrary bytes as a tar stream, twice (so that the
// second pass meets the symlinks the first made), into a root beside a
// canary file and a canary directory. Whatever the stream holds (absolute
// names, "..", symlinks out by relative or absolute paths, hard links,
// entries through links) nothing outside the root may change: the parent
// holds exactly the root and the canaries, unchanged.
func FuzzExtract(f *testing.F) {
	for _, entries := range [][]tarEntry{
		{{name: "a/b.txt", body: "x"}, {name: "d/", typ: tar.TypeDir}},
		{{name: "l", typ: tar.TypeSymlink, link: "../canary"}, {name: "l", body: "pwned"}},
		{{name: "l", typ: tar.TypeSymlink, link: "../canarydir"}, {name: "l/x", body: "pwned"}},
		{{name: "l", typ: tar.TypeSymlink, link: "/proc/self/cwd/canarydir"}, {name: "l/x", body: "pwned"}},
		{{name: "l", typ: tar.TypeSymlink, link: "/proc/self/cwd/canary"}, {name: "h", typ: tar.TypeLink, link: "l"}},
		{{name: "l", typ: tar.TypeSymlink, link: ".."}, {name: "l/canary", body: "pwned"}},
		{{name: "l", typ: tar.TypeSymlink, link: ".."}, {name: "l", typ: tar.TypeDir, mode: 0o777}},
		{{name: "d", typ: tar.TypeSymlink, link: "../canarydir"}, {name: "d/", typ: tar.TypeDir, mode: 0o777}},
		{{name: "../canary", body: "pwned"}},
		{{name: "/canary", body: "pwned"}},
		{{name: "a/../../canary", body: "pwned"}},
		{{name: "f", body: "x"}, {name: "f/g", body: "x"}},
		{{name: "f", body: "x"}, {name: "f", typ: tar.TypeLink, link: "f"}},
		{{name: "h", typ: tar.TypeLink, link: "../canary"}},
		{{name: ".", typ: tar.TypeDir, mode: 0o777}},
	} {
		f.Add(tarOf(f, entries))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if declaresMore(data, 1<<20) {
			return // a tiny stream can declare a huge sparse file: not what this is about
		}
		parent := t.TempDir()
		root := filepath.Join(parent, "root")
		canary := filepath.Join(parent, "canary")
		canaryDir := filepath.Join(parent, "canarydir")
		for _, err := range []error{os.Mkdir(root, 0o755), os.WriteFile(canary, []byte("canary"), 0o600), os.Mkdir(canaryDir, 0o700)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		before := snapshot(t, parent, root)
		// "/proc/self/cwd/..." in a link reaches the parent by an absolute
		// path the fuzzer can spell.
		t.Chdir(parent)
		for range 2 {
			x := &extractor{dest: root, uid: os.Getuid(), gid: os.Getgid()}
			x.extract(bytes.NewReader(data)) // refusals are fine: escapes are not
		}
		if after := snapshot(t, parent, root); after != before {
			t.Fatalf("outside the root, before:\n%s\nafter:\n%s", before, after)
		}
	})
}

// snapshot describes everything under parent except root, which must be a
// real directory: names, kinds, modes, sizes, contents.
func snapshot(t *testing.T, parent, root string) string {
	t.Helper()
	fi, err := os.Lstat(root)
	if err != nil || !fi.IsDir() {
		t.Fatalf("root: %v, %v: want a directory", fi, err)
	}
	var b bytes.Buffer
	err = filepath.WalkDir(parent, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(path + " " + fi.Mode().String())
		if fi.Mode().IsRegular() {
			content, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b.WriteString(" " + string(content))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// declaresMore reports whether a tar stream has an entry declaring more
// than limit bytes.
func declaresMore(data []byte, limit int64) bool {
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err != nil {
			return false
		}
		if hdr.Size > limit {
			return true
		}
	}
}

// tarOf is makeTar for a fuzz target's seeds.
func tarOf(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ, mode := e.typ, e.mode
		if typ == 0 {
			typ = tar.TypeReg
		}
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Mode: mode, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
