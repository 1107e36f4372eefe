package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/tarx"
)

// fuzzLimits bound each fuzzed import: a few header blocks can announce a
// sparse file of terabytes, which the bounds must stop (and do, here too).
var fuzzLimits = Limits{MaxBytes: 1 << 20, MaxEntries: 512, MaxEntrySize: 1 << 20}

// FuzzImport imports arbitrary bytes as a layer, in either format, into a
// fresh store beside a canary file and directory. Whatever the archive
// holds:
//   - nothing outside the layer changes: the parent holds the store and
//     the canaries, unchanged (links included: "/proc/self/cwd/outside"
//     reaches them by an absolute name, since the test runs there);
//   - the store holds exactly the one complete layer, or nothing at all
//     when the import failed, and its error is an archive's refusal;
//   - every name in the layer is one the archive gave (or a directory
//     above one, or a whiteout's), so nothing was written through a
//     symbolic link inside the layer either;
//   - no device node but overlayfs's whiteout (char 0:0), no FIFO, no
//     socket;
//   - no setuid or setgid bit the archive did not give that very name's
//     last file or directory entry (or the file it is a hard link of);
//   - no xattr but trusted.overlay.opaque=y on a directory.
func FuzzImport(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.data, s.oci)
	}
	f.Fuzz(func(t *testing.T, data []byte, oci bool) {
		format := Overlay
		if oci {
			format = OCI
		}
		parent := t.TempDir()
		outside := filepath.Join(parent, "outside")
		for _, err := range []error{
			os.Mkdir(outside, 0o755),
			os.Mkdir(filepath.Join(parent, "cache"), 0o755),
			os.WriteFile(filepath.Join(outside, "secret"), []byte("canary"), 0o600),
			os.Mkdir(filepath.Join(outside, "dir"), 0o700),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		before := describe(t, outside)
		t.Chdir(parent)
		s, err := Open(filepath.Join(parent, "cache"))
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Import(context.Background(), bytes.NewReader(data), format, fuzzLimits)
		if after := describe(t, outside); after != before {
			t.Fatalf("outside the store, before:\n%s\nafter:\n%s", before, after)
		}
		assertOnly(t, parent, "cache", "outside")
		assertOnly(t, filepath.Join(parent, "cache"), "templates")
		assertOnly(t, filepath.Join(parent, "cache", "templates"), "layers")
		assertOnly(t, s.root, "sha256", "tmp")
		assertOnly(t, s.tmp())
		if err != nil {
			var te *tarx.Error
			if !errors.As(err, &te) {
				t.Fatalf("Import: %v, want an archive's refusal", err)
			}
			assertOnly(t, s.digests())
			return
		}
		assertOnly(t, s.digests(), strings.TrimPrefix(info.Digest, "sha256:"))
		dir, err := s.Dir(info.Digest)
		if err != nil {
			t.Fatal(err)
		}
		assertOnly(t, filepath.Dir(dir), completeMark, fsDir)
		checkLayer(t, dir, data, format)
	})
}

// describe lists everything under dir: names, modes, owners, link
// counts, xattrs and contents.
func describe(t *testing.T, dir string) string {
	t.Helper()
	var out strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var content []byte
		if d.Type().IsRegular() {
			if content, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		st := lstatT(t, p)
		fmt.Fprintf(&out, "%s %o %d:%d links %d xattrs %v %q\n", p, st.Mode, st.Uid, st.Gid, st.Nlink, xattrs(t, p), content)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// assertOnly checks that dir holds exactly names.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, "\n") != strings.Join(names, "\n") {
		t.Fatalf("%s holds %q, want %q", dir, got, names)
	}
}

// archiveView is what the archive itself says, read apart from the
// extraction: the names it gives, and which file or directory entry made
// what each name ends as (a hard link the entry its target was made by),
// with that entry's setuid and setgid bits.
type archiveView struct {
	names map[string]bool
	made  map[string]int // name: the index of the entry that made it
	setid map[int]uint32 // entry index: its setuid and setgid bits
}

func viewOf(data []byte, format Format) archiveView {
	v := archiveView{names: map[string]bool{"": true}, made: map[string]int{}, setid: map[int]uint32{}}
	tr := tar.NewReader(bytes.NewReader(data))
	for i := 1; ; i++ {
		hdr, err := tr.Next()
		if err != nil {
			break // the import succeeded: it ended where the extraction did
		}
		name, err := tarx.Name(hdr.Name)
		if err != nil || hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		v.add(name)
		if format == OCI {
			dir, base := path.Split(name)
			if strings.HasPrefix(base, whPrefix) {
				v.add(path.Join(dir, strings.TrimPrefix(base, whPrefix)))
			}
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeGNUSparse, tar.TypeDir:
			v.made[name] = i
			v.setid[i] = uint32(hdr.Mode) & (unix.S_ISUID | unix.S_ISGID)
		case tar.TypeLink:
			if target, err := tarx.Name(hdr.Linkname); err == nil && v.made[target] != 0 {
				v.made[name] = v.made[target]
			} else {
				delete(v.made, name)
			}
		case tar.TypeFifo: // dropped, leaving what is there
		default:
			delete(v.made, name)
		}
	}
	return v
}

func (v archiveView) add(name string) {
	for ; name != "." && name != "/" && name != ""; name = path.Dir(name) {
		v.names[name] = true
	}
}

// checkLayer checks the extracted layer dir against the archive data.
func checkLayer(t *testing.T, dir string, data []byte, format Format) {
	t.Helper()
	view := viewOf(data, format)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if name == "." {
			name = ""
		}
		if !view.names[name] {
			t.Errorf("%q is in the layer, but no archive entry names it", name)
		}
		st := lstatT(t, p)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev != 0 {
				t.Errorf("%q is the character device %d", name, st.Rdev)
			}
		case unix.S_IFREG, unix.S_IFDIR, unix.S_IFLNK:
		default:
			t.Errorf("%q is of mode %o", name, st.Mode)
		}
		if bits := st.Mode & (unix.S_ISUID | unix.S_ISGID); bits&^view.setid[view.made[name]] != 0 {
			t.Errorf("%q has the setuid/setgid bits %o, which the archive did not give it", name, bits)
		}
		for _, x := range xattrs(t, p) {
			buf := make([]byte, 256)
			n, err := unix.Lgetxattr(p, x, buf)
			if err != nil {
				t.Fatalf("%q: %s: %v", name, x, err)
			}
			switch {
			case x == opaqueXattr && st.Mode&unix.S_IFMT == unix.S_IFDIR && string(buf[:n]) == "y":
			default:
				t.Errorf("%q (mode %o) has the xattr %s=%q", name, st.Mode, x, buf[:n])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type fuzzSeed struct {
	data []byte
	oci  bool
}

// fuzzSeeds are valid layers and the hostile archives the tests build.
func fuzzSeeds(tb testing.TB) []fuzzSeed {
	out := "/proc/self/cwd/outside" // the test runs in the canaries' parent
	reg := func(name, body string, mode int64) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), Linkname: body}
	}
	dir := func(name string, mode int64) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}
	}
	sym := func(name, to string) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: to, Mode: 0o777}
	}
	hard := func(name, to string) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: to}
	}
	char := func(name string, major, minor int64) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeChar, Name: name, Devmajor: major, Devminor: minor, Mode: 0o600}
	}
	opq := map[string]string{paxXattr + opaqueXattr: "y"}
	ping := map[string]string{paxXattr + "security.capability": capNetRaw}
	seeds := []struct {
		oci     bool
		entries []*tar.Header
	}{
		// Valid layers.
		{false, []*tar.Header{dir("./", 0o755), {Typeflag: tar.TypeDir, Name: "./etc/", Mode: 0o755, PAXRecords: opq}, reg("./etc/hostname", "box", 0o644), char("./gone", 0, 0), reg("./.wh.literal", "x", 0o644)}},
		{true, []*tar.Header{dir("etc/", 0o755), reg("etc/keep", "k", 0o644), reg(".wh.gone", "", 0o644), reg("var/lib/.wh..wh..opq", "", 0o644), reg(".wh.first", "", 0), dir("first/", 0o755), reg(".wh.second", "", 0), reg("second/f", "f", 0o644), reg(".wh..wh.plnk/1.2", "aufs", 0o644)}},
		{true, []*tar.Header{reg("bin/su", "su", 0o4755), reg("bin/wall", "w", 0o2755), dir("tmp/", 0o1777), dir("g/", 0o2755), reg("g/sub/f", "x", 0o644), hard("bin/su2", "bin/su"), reg("bin/su", "now plain", 0o755)}},
		{false, []*tar.Header{{Typeflag: tar.TypeReg, Name: "bin/ping", Mode: 0o755, Uid: 1000, Size: 3, Linkname: "ELF", PAXRecords: ping}, hard("bin/ping2", "bin/ping"), sym("s", "bin/ping"), hard("t", "s")}},
		{false, []*tar.Header{reg("a", "one", 0o644), reg("a", "two", 0o644), sym("b", "/x"), reg("b", "file now", 0o644), reg("d", "f", 0o644), dir("d/", 0o755), reg("d/in", "x", 0o644)}},
		// Hostile ones.
		{false, []*tar.Header{reg("../evil", "x", 0o644)}},
		{false, []*tar.Header{reg("/evil", "x", 0o644)}},
		{false, []*tar.Header{reg("a/../../evil", "x", 0o644)}},
		{false, []*tar.Header{sym("l", out), reg("l/pwned", "x", 0o644)}},
		{true, []*tar.Header{sym("l", "../../../../../../../../outside"), reg("l/pwned", "x", 0o644)}},
		{false, []*tar.Header{sym("l", out), dir("l/pwned/", 0o755)}},
		{false, []*tar.Header{sym("l", out+"/secret"), reg("l", "mine", 0o644)}},
		{false, []*tar.Header{sym("l", out), hard("pwned", "l/secret")}},
		{false, []*tar.Header{reg("f", "x", 0o644), sym("l", out), hard("l/pwned", "f")}},
		{false, []*tar.Header{hard("x", out+"/secret")}},
		{false, []*tar.Header{sym("l", out), char("l/pwned", 0, 0)}},
		{true, []*tar.Header{sym("l", out), reg("l/.wh..wh..opq", "", 0o644)}},
		{true, []*tar.Header{sym("l", out), reg("l/.wh.secret", "", 0o644)}},
		{false, []*tar.Header{dir("d/", 0o755), sym("d/l", "."), reg("d/l/f", "through an inner link", 0o644)}},
		{false, []*tar.Header{char("dev/null", 1, 3)}},
		{true, []*tar.Header{char("w", 0, 0)}},
		{false, []*tar.Header{{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}}},
		{false, []*tar.Header{{Typeflag: tar.TypeFifo, Name: "pipe"}, reg("after", "x", 0o644)}},
		{true, []*tar.Header{reg(".wh...", "", 0o644)}},
		{false, []*tar.Header{dir("d/", 0o755), reg("d", "x", 0o644)}},
		{false, []*tar.Header{reg(strings.Repeat("d/", 40)+"f", "deep", 0o644)}},
		{false, []*tar.Header{{Typeflag: tar.TypeReg, Name: "f", Mode: 0o755, Size: 1, Linkname: "x", PAXRecords: map[string]string{paxXattr + "security.capability": "caps", paxXattr + "user.x": "y"}}}},
	}
	var out2 []fuzzSeed
	for _, s := range seeds {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range s.entries {
			body := ""
			if h.Typeflag == tar.TypeReg {
				body, h.Linkname = h.Linkname, ""
			}
			h.ModTime = mtime
			h.Format = tar.FormatPAX
			if err := tw.WriteHeader(h); err != nil {
				tb.Fatal(err)
			}
			if _, err := io.WriteString(tw, body); err != nil {
				tb.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			tb.Fatal(err)
		}
		out2 = append(out2, fuzzSeed{buf.Bytes(), s.oci})
	}
	// A header announcing a terabyte sparse file in a few blocks.
	var sparse bytes.Buffer
	tw := tar.NewWriter(&sparse)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "big", Size: 1 << 40, Mode: 0o644}); err != nil {
		tb.Fatal(err)
	}
	tw.Flush()
	out2 = append(out2, fuzzSeed{append(sparse.Bytes(), make([]byte, 1024)...), false})
	return out2
}
