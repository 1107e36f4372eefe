package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/tarx"
)

// deep climbs out of any directory the store could extract in.
var deep = strings.Repeat("../", 40)

func TestUnsafeNamesRefused(t *testing.T) {
	outside := t.TempDir()
	for _, name := range []string{
		"../evil",
		"a/../../evil",
		deep + strings.TrimPrefix(outside, "/") + "/evil",
		outside + "/evil",
		"./a/../../" + deep + "evil",
	} {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			data := newArchive().file(t, "ok", "fine").file(t, name, "pwned").bytes(t)
			refused(t, s, data, Overlay, Limits{}, tarx.ErrUnsafe)
			assertNoEntries(t, outside)
		})
	}
}

func TestWriteThroughSymlinkRefused(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	rel := deep + strings.TrimPrefix(outside, "/")
	cases := map[string]func(a *archive) *archive{
		"file through absolute link": func(a *archive) *archive {
			return a.symlink(t, "link", outside).file(t, "link/pwned", "x")
		},
		"file through relative link": func(a *archive) *archive {
			return a.symlink(t, "link", rel).file(t, "link/pwned", "x")
		},
		"file through nested link": func(a *archive) *archive {
			return a.dir(t, "d/").symlink(t, "d/link", outside).file(t, "d/link/sub/pwned", "x")
		},
		"dir through link": func(a *archive) *archive {
			return a.symlink(t, "link", outside).dir(t, "link/pwned/")
		},
		"symlink through link": func(a *archive) *archive {
			return a.symlink(t, "link", outside).symlink(t, "link/pwned", "/")
		},
		"hardlink through link": func(a *archive) *archive {
			return a.symlink(t, "link", outside).hardlink(t, "pwned", "link/secret")
		},
		"hardlink into link": func(a *archive) *archive {
			return a.file(t, "f", "x").symlink(t, "link", outside).hardlink(t, "link/pwned", "f")
		},
		"whiteout through link": func(a *archive) *archive {
			return a.symlink(t, "link", outside).add(t, &tar.Header{Typeflag: tar.TypeChar, Name: "link/pwned"}, "")
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			refused(t, s, build(newArchive()).bytes(t), Overlay, Limits{}, tarx.ErrUnsafe)
			entries, _ := os.ReadDir(outside)
			if len(entries) != 1 {
				t.Fatalf("outside holds %v", entries)
			}
			if st := lstatT(t, filepath.Join(outside, "secret")); st.Nlink != 1 {
				t.Fatalf("the outside file has %d links", st.Nlink)
			}
		})
	}
	t.Run("opaque through link", func(t *testing.T) {
		s := openStore(t)
		data := newArchive().symlink(t, "link", outside).file(t, "link/.wh..wh..opq", "").bytes(t)
		refused(t, s, data, OCI, Limits{}, tarx.ErrUnsafe)
		if isOpaque(t, outside) {
			t.Fatal("the outside directory was marked opaque")
		}
	})
	t.Run("OCI whiteout through link", func(t *testing.T) {
		s := openStore(t)
		data := newArchive().symlink(t, "link", outside).file(t, "link/.wh.pwned", "").bytes(t)
		refused(t, s, data, OCI, Limits{}, tarx.ErrUnsafe)
		if _, err := os.Lstat(filepath.Join(outside, "pwned")); err == nil {
			t.Fatal("a whiteout was made outside")
		}
	})
	t.Run("a later file replaces the link itself", func(t *testing.T) {
		s := openStore(t)
		_, dir := mustImport(t, s, newArchive().symlink(t, "link", outside+"/secret").file(t, "link", "mine").bytes(t), Overlay)
		if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "s" {
			t.Fatalf("the outside file is %q, %v", b, err)
		}
		if st := lstatT(t, filepath.Join(dir, "link")); st.Mode&unix.S_IFMT != unix.S_IFREG {
			t.Fatalf("link is of mode %o, want a regular file", st.Mode)
		}
	})
}

func TestHardlinks(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, build := range map[string]func(a *archive) *archive{
		"absolute":      func(a *archive) *archive { return a.hardlink(t, "x", secret) },
		"climbing":      func(a *archive) *archive { return a.hardlink(t, "x", deep+strings.TrimPrefix(secret, "/")) },
		"a later name":  func(a *archive) *archive { return a.hardlink(t, "x", "later").file(t, "later", "l") },
		"a missing dir": func(a *archive) *archive { return a.hardlink(t, "x", "nodir/f") },
		"a directory":   func(a *archive) *archive { return a.dir(t, "d/").hardlink(t, "x", "d") },
		"itself":        func(a *archive) *archive { return a.hardlink(t, "x", "x") },
		"the root":      func(a *archive) *archive { return a.hardlink(t, "x", ".") },
		"a whiteout": func(a *archive) *archive {
			return a.add(t, &tar.Header{Typeflag: tar.TypeChar, Name: "w"}, "").hardlink(t, "x", "w")
		},
		"host /etc/passwd":  func(a *archive) *archive { return a.hardlink(t, "etc/passwd", "/etc/passwd") },
		"empty link target": func(a *archive) *archive { return a.hardlink(t, "x", "") },
	} {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			refused(t, s, build(newArchive().file(t, "f", "x")).bytes(t), Overlay, Limits{}, tarx.ErrUnsafe)
			if st := lstatT(t, secret); st.Nlink != 1 {
				t.Fatalf("the outside file has %d links", st.Nlink)
			}
		})
	}
	t.Run("to an earlier file", func(t *testing.T) {
		s := openStore(t)
		info, dir := mustImport(t, s, newArchive().file(t, "a/f", "hello").hardlink(t, "b/g", "a/f").symlink(t, "s", "a/f").hardlink(t, "t", "s").bytes(t), Overlay)
		f, g := lstatT(t, filepath.Join(dir, "a/f")), lstatT(t, filepath.Join(dir, "b/g"))
		if f.Ino != g.Ino || f.Nlink != 2 {
			t.Fatalf("a/f %d (%d links), b/g %d", f.Ino, f.Nlink, g.Ino)
		}
		if l := lstatT(t, filepath.Join(dir, "t")); l.Mode&unix.S_IFMT != unix.S_IFLNK {
			t.Fatalf("t is of mode %o, want the symbolic link", l.Mode)
		}
		if info.SizeBytes != 5 {
			t.Fatalf("SizeBytes %d, want 5 (a hard link counts once)", info.SizeBytes)
		}
	})
}

func TestDeviceNodes(t *testing.T) {
	dev := func(kind byte, major, minor int64) []byte {
		return newArchive().file(t, "f", "x").add(t, &tar.Header{Typeflag: kind, Name: "dev/node", Devmajor: major, Devminor: minor, Mode: 0o666}, "").bytes(t)
	}
	for _, c := range []struct {
		name string
		data []byte
		f    Format
	}{
		{"null", dev(tar.TypeChar, 1, 3), Overlay},
		{"block", dev(tar.TypeBlock, 8, 0), Overlay},
		{"block 0:0", dev(tar.TypeBlock, 0, 0), Overlay},
		{"char 0:1", dev(tar.TypeChar, 0, 1), Overlay},
		{"OCI null", dev(tar.TypeChar, 1, 3), OCI},
		{"OCI char 0:0", dev(tar.TypeChar, 0, 0), OCI},
		{"OCI block", dev(tar.TypeBlock, 8, 0), OCI},
	} {
		t.Run(c.name, func(t *testing.T) {
			refused(t, openStore(t), c.data, c.f, Limits{}, tarx.ErrUnsafe)
		})
	}
	t.Run("overlay whiteout", func(t *testing.T) {
		_, dir := mustImport(t, openStore(t), dev(tar.TypeChar, 0, 0), Overlay)
		st := lstatT(t, filepath.Join(dir, "dev/node"))
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Fatalf("dev/node: mode %o rdev %d, want the whiteout char 0:0", st.Mode, st.Rdev)
		}
	})
}

func TestFIFODropped(t *testing.T) {
	for _, f := range []Format{Overlay, OCI} {
		data := newArchive().add(t, &tar.Header{Typeflag: tar.TypeFifo, Name: "pipe"}, "").file(t, "after", "x").bytes(t)
		_, dir := mustImport(t, openStore(t), data, f)
		if _, err := os.Lstat(filepath.Join(dir, "pipe")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%v: the FIFO is there: %v", f, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "after")); err != nil {
			t.Fatalf("%v: the entry after the FIFO: %v", f, err)
		}
	}
}

func TestModesOwnersTimesKept(t *testing.T) {
	t0 := time.Date(2020, 1, 2, 3, 4, 5, 123456789, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	a := newArchive().
		add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, ModTime: at(0), Format: tar.FormatPAX}, "").
		add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "home/", Mode: 0o750, Uid: 1000, Gid: 1001, ModTime: at(time.Hour), Format: tar.FormatPAX}, "").
		add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "home/f", Mode: 0o640, Uid: 1234, Gid: 5678, ModTime: at(2 * time.Hour), Format: tar.FormatPAX}, "data").
		add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "bin/su", Mode: 0o4755, Uid: 0, Gid: 0, ModTime: at(3 * time.Hour)}, "su").
		add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "bin/wall", Mode: 0o2755, Uid: 0, Gid: 5, ModTime: at(3 * time.Hour)}, "wall").
		add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "bin/setuser", Mode: 0o6750, Uid: 1000, Gid: 1000, ModTime: at(3 * time.Hour)}, "x").
		add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: at(4 * time.Hour)}, "").
		add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "nothing", Mode: 0o000, Uid: 9, Gid: 9, ModTime: at(4 * time.Hour)}, "").
		add(t, &tar.Header{Typeflag: tar.TypeSymlink, Name: "home/l", Linkname: "/etc/passwd", Mode: 0o777, Uid: 77, Gid: 88, ModTime: at(5 * time.Hour), Format: tar.FormatPAX}, "").
		add(t, &tar.Header{Typeflag: tar.TypeChar, Name: "home/w", Mode: 0o600, Uid: 5, Gid: 6, ModTime: at(6 * time.Hour), Format: tar.FormatPAX}, "")
	data := a.bytes(t)
	// The archive's own entries, Lchown'ed as they were: what the
	// extraction must reproduce.
	_, dir := mustImport(t, openStore(t), data, Overlay)
	for _, c := range []struct {
		name     string
		kind     uint32
		mode     uint32
		uid, gid uint32
		mtime    time.Time
	}{
		{"", unix.S_IFDIR, 0o755, 0, 0, at(0)},
		{"home", unix.S_IFDIR, 0o750, 1000, 1001, at(time.Hour)},
		{"home/f", unix.S_IFREG, 0o640, 1234, 5678, at(2 * time.Hour)},
		{"bin/su", unix.S_IFREG, 0o4755, 0, 0, at(3 * time.Hour).Truncate(time.Second)},
		{"bin/wall", unix.S_IFREG, 0o2755, 0, 5, at(3 * time.Hour).Truncate(time.Second)},
		{"bin/setuser", unix.S_IFREG, 0o6750, 1000, 1000, at(3 * time.Hour).Truncate(time.Second)},
		{"tmp", unix.S_IFDIR, 0o1777, 0, 0, at(4 * time.Hour).Truncate(time.Second)},
		{"nothing", unix.S_IFREG, 0, 9, 9, at(4 * time.Hour).Truncate(time.Second)},
		{"home/l", unix.S_IFLNK, 0o777, 77, 88, at(5 * time.Hour)},
		{"home/w", unix.S_IFCHR, 0o600, 5, 6, at(6 * time.Hour)},
	} {
		st := lstatT(t, filepath.Join(dir, c.name))
		if st.Mode&unix.S_IFMT != c.kind || st.Mode&0o7777 != c.mode {
			t.Errorf("%q: mode %o, want %o|%o", c.name, st.Mode, c.kind, c.mode)
		}
		if st.Uid != c.uid || st.Gid != c.gid {
			t.Errorf("%q: owner %d:%d, want %d:%d", c.name, st.Uid, st.Gid, c.uid, c.gid)
		}
		if got := time.Unix(st.Mtim.Unix()); !got.Equal(c.mtime) {
			t.Errorf("%q: mtime %v, want %v", c.name, got, c.mtime)
		}
	}
	if l, err := os.Readlink(filepath.Join(dir, "home/l")); err != nil || l != "/etc/passwd" {
		t.Errorf("home/l -> %q, %v", l, err)
	}
	// bin was made for bin/su, with no entry of its own: root's, 0755.
	if st := lstatT(t, filepath.Join(dir, "bin")); st.Mode&0o7777 != 0o755 || st.Uid != 0 {
		t.Errorf("bin: mode %o owner %d", st.Mode, st.Uid)
	}
}

func TestStoreDirsPrivate(t *testing.T) {
	s := openStore(t)
	_, dir := mustImport(t, s, newArchive().add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "su", Mode: 0o4755}, "x").bytes(t), Overlay)
	// Every directory from the store's root down to the layer's own is
	// root's and closed to others: a setuid file inside is out of reach.
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		st := lstatT(t, d)
		if st.Uid != 0 || st.Mode&0o077 != 0 {
			t.Errorf("%s: owner %d mode %o, want root's 0700", d, st.Uid, st.Mode&0o7777)
		}
		if d == s.root {
			break
		}
	}
}

// capNetRaw is ping's security.capability: revision 2, effective,
// permitted CAP_NET_RAW.
var capNetRaw = string(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(make([]byte, 0, 20), 0x02000001), 1<<13)) + string(make([]byte, 12))

// TestXattrsDropped: of the xattrs an archive carries, only overlayfs's
// opaque mark is kept, as the format says.
func TestXattrsDropped(t *testing.T) {
	recs := map[string]string{
		"SCHILY.xattr.user.foo":                 "bar",
		"SCHILY.xattr.security.capability":      capNetRaw, // well-formed: dropped all the same
		"SCHILY.xattr.trusted.overlay.redirect": "/etc",
		"SCHILY.xattr.trusted.overlay.metacopy": "y",
		"SCHILY.xattr.trusted.overlay.opaque":   "y",
	}
	for _, f := range []Format{Overlay, OCI} {
		data := newArchive().
			add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "file", PAXRecords: recs}, "x").
			add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "dir/", PAXRecords: recs, Mode: 0o755}, "").
			add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "notopaque/", PAXRecords: map[string]string{"SCHILY.xattr.trusted.overlay.opaque": "x"}, Mode: 0o755}, "").
			bytes(t)
		_, dir := mustImport(t, openStore(t), data, f)
		if x := xattrs(t, filepath.Join(dir, "file")); len(x) != 0 {
			t.Errorf("%v: file has the xattrs %v", f, x)
		}
		var want []string
		if f == Overlay {
			want = []string{opaqueXattr}
		}
		if x := xattrs(t, filepath.Join(dir, "dir")); !slices.Equal(x, want) {
			t.Errorf("%v: dir has the xattrs %v, want %v", f, x, want)
		}
		if x := xattrs(t, filepath.Join(dir, "notopaque")); len(x) != 0 {
			t.Errorf("%v: notopaque has the xattrs %v", f, x)
		}
	}
}

func TestOverlayFormat(t *testing.T) {
	opq := map[string]string{"SCHILY.xattr.trusted.overlay.opaque": "y"}
	data := newArchive().
		add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}, "").
		add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "./etc/", Mode: 0o755, PAXRecords: opq}, "").
		file(t, "./etc/hostname", "box").
		add(t, &tar.Header{Typeflag: tar.TypeChar, Name: "./gone"}, "").
		file(t, "./.wh.literal", "a file that happens to be named so").
		add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "./var/", Mode: 0o755}, "").
		bytes(t)
	info, dir := mustImport(t, openStore(t), data, Overlay)
	if !isOpaque(t, filepath.Join(dir, "etc")) || isOpaque(t, filepath.Join(dir, "var")) || isOpaque(t, dir) {
		t.Error("opaque marks are wrong")
	}
	if st := lstatT(t, filepath.Join(dir, "gone")); st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("gone: mode %o", st.Mode)
	}
	if st := lstatT(t, filepath.Join(dir, ".wh.literal")); st.Mode&unix.S_IFMT != unix.S_IFREG {
		t.Errorf(".wh.literal: mode %o", st.Mode)
	}
	if info.Entries != 6 {
		t.Errorf("Entries %d, want 6", info.Entries)
	}
	t.Run("opaque root", func(t *testing.T) {
		data := newArchive().add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, PAXRecords: opq}, "").bytes(t)
		_, dir := mustImport(t, openStore(t), data, Overlay)
		if !isOpaque(t, dir) {
			t.Error("the root is not opaque")
		}
	})
	t.Run("root as a file", func(t *testing.T) {
		refused(t, openStore(t), newArchive().file(t, ".", "x").bytes(t), Overlay, Limits{}, tarx.ErrUnsafe)
	})
}

func TestOCIWhiteouts(t *testing.T) {
	data := newArchive().
		dir(t, "etc/").
		file(t, "etc/keep", "k").
		file(t, ".wh.gone", "").
		file(t, "etc/.wh.old", "").
		file(t, "var/lib/.wh..wh..opq", ""). // var/lib has no entry of its own
		dir(t, "usr/").
		file(t, "usr/.wh..wh..opq", "").
		file(t, "usr/new", "n").
		file(t, "same", "s").
		file(t, ".wh.same", ""). // hides only lower layers' "same"
		file(t, ".wh.first", "").
		dir(t, "first/"). // replaced a lower directory: opaque
		file(t, ".wh.second", "").
		file(t, "second/f", "f"). // beneath a whiteout of its own layer: made anew, opaque
		file(t, ".wh..wh.plnk/123.456", "aufs").
		file(t, ".wh..wh.aufs", "").
		bytes(t)
	_, dir := mustImport(t, openStore(t), data, OCI)
	for _, wh := range []string{"gone", "etc/old"} {
		if st := lstatT(t, filepath.Join(dir, wh)); st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("%s: mode %o rdev %d, want a whiteout", wh, st.Mode, st.Rdev)
		}
	}
	for _, d := range []string{"var/lib", "usr", "first", "second"} {
		if !isOpaque(t, filepath.Join(dir, d)) {
			t.Errorf("%s is not opaque", d)
		}
	}
	for _, d := range []string{"", "etc", "var"} {
		if isOpaque(t, filepath.Join(dir, d)) {
			t.Errorf("%q is opaque", d)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "same")); err != nil || string(b) != "s" {
		t.Errorf("same: %q, %v", b, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".wh.") {
			t.Errorf("%s is left as a name", e.Name())
		}
	}
	t.Run("opaque root", func(t *testing.T) {
		_, dir := mustImport(t, openStore(t), newArchive().file(t, ".wh..wh..opq", "").file(t, "only", "o").bytes(t), OCI)
		if !isOpaque(t, dir) {
			t.Error("the root is not opaque")
		}
	})
}

func TestOCIWhiteoutNamesRefused(t *testing.T) {
	for _, name := range []string{".wh...", "a/.wh..", ".wh.", "a/.wh.", ".wh.../x", ".wh..x/y", "a/.wh.b/c"} {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			refused(t, s, newArchive().dir(t, "a/").file(t, name, "").bytes(t), OCI, Limits{}, tarx.ErrUnsafe)
		})
	}
	// What tarx's names refuse is refused as a whiteout too.
	t.Run("climbing", func(t *testing.T) {
		outside := t.TempDir()
		refused(t, openStore(t), newArchive().file(t, deep+strings.TrimPrefix(outside, "/")+"/.wh.x", "").bytes(t), OCI, Limits{}, tarx.ErrUnsafe)
		assertNoEntries(t, outside)
	})
}

func TestDuplicateEntries(t *testing.T) {
	data := newArchive().
		file(t, "a", "one").file(t, "a", "two").
		symlink(t, "b", "/x").file(t, "b", "file now").
		file(t, "c", "file").symlink(t, "c", "/link now").
		file(t, "d", "file").dir(t, "d/").file(t, "d/in", "x").
		dir(t, "e/").dir(t, "e/").
		bytes(t)
	_, dir := mustImport(t, openStore(t), data, Overlay)
	for name, want := range map[string]string{"a": "two", "b": "file now", "d/in": "x"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(dir, "c")); err != nil || l != "/link now" {
		t.Errorf("c -> %q, %v", l, err)
	}
	for name, build := range map[string]func(a *archive) *archive{
		"file onto dir":     func(a *archive) *archive { return a.dir(t, "d/").file(t, "d", "x") },
		"link onto dir":     func(a *archive) *archive { return a.dir(t, "d/").symlink(t, "d", "/") },
		"hardlink onto dir": func(a *archive) *archive { return a.file(t, "f", "x").dir(t, "d/").hardlink(t, "d", "f") },
		"whiteout onto dir": func(a *archive) *archive {
			return a.dir(t, "d/").add(t, &tar.Header{Typeflag: tar.TypeChar, Name: "d"}, "")
		},
		"file through file": func(a *archive) *archive { return a.file(t, "f", "x").file(t, "f/g", "y") },
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, openStore(t), build(newArchive()).bytes(t), Overlay, Limits{}, tarx.ErrDestination)
		})
	}
}

// endless is a stream that never ends: a header that announces size
// bytes then zeros, and reports how much was read.
type endless struct {
	head []byte
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	if e.read < int64(len(e.head)) {
		n = copy(p, e.head[e.read:])
	} else {
		clear(p)
		n = len(p)
	}
	e.read += int64(n)
	return n, nil
}

func TestMaxBytes(t *testing.T) {
	t.Run("files together", func(t *testing.T) {
		data := newArchive().file(t, "a", strings.Repeat("a", 600)).file(t, "b", strings.Repeat("b", 600)).bytes(t)
		refused(t, openStore(t), data, Overlay, Limits{MaxBytes: 1000}, tarx.ErrTooLarge)
		_, err := openStore(t).Import(context.Background(), bytes.NewReader(data), Overlay, Limits{MaxBytes: 1200})
		if err != nil {
			t.Fatalf("at the bound: %v", err)
		}
	})
	t.Run("a huge announced file stops at its header", func(t *testing.T) {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "huge", Size: 1 << 40, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		tw.Flush() // the header's block only
		in := &endless{head: b.Bytes()}
		s := openStore(t)
		_, err := s.Import(context.Background(), in, Overlay, Limits{MaxBytes: 1 << 20})
		if !errors.Is(err, tarx.ErrTooLarge) {
			t.Fatalf("Import: %v", err)
		}
		if in.read > 1<<20 {
			t.Fatalf("read %d bytes of the stream", in.read)
		}
		assertEmpty(t, s)
	})
	t.Run("the bytes written are counted", func(t *testing.T) {
		// Only the written count stands here (the reader's announced count
		// is off): it alone must stop the extraction.
		data := newArchive().file(t, "a", strings.Repeat("a", 600)).file(t, "b", strings.Repeat("b", 600)).bytes(t)
		root, err := os.OpenRoot(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		e := newExtractor(context.Background(), root, bytes.NewReader(data), Overlay, Limits{MaxBytes: 1000})
		e.x = tarx.NewReader(bytes.NewReader(data), tarx.Options{})
		if err := e.run(); !errors.Is(err, tarx.ErrTooLarge) {
			t.Fatalf("run: %v", err)
		}
		if e.written > 1000 {
			t.Fatalf("wrote %d bytes", e.written)
		}
	})
	t.Run("one entry", func(t *testing.T) {
		data := newArchive().file(t, "a", strings.Repeat("a", 600)).bytes(t)
		refused(t, openStore(t), data, Overlay, Limits{MaxEntrySize: 500}, tarx.ErrMalformed)
	})
}

func TestMaxEntries(t *testing.T) {
	// A billion tiny files, written as they are read: the import stops at
	// the bound, having read little more than it.
	pr, pw := io.Pipe()
	made := make(chan int, 1)
	go func() {
		tw := tar.NewWriter(pw)
		n := 0
		for ; n < 1e9; n++ {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("d%d/f%d", n%100, n), Mode: 0o644, Size: 1}); err != nil {
				break
			}
			if _, err := tw.Write([]byte("x")); err != nil {
				break
			}
		}
		made <- n
	}()
	s := openStore(t)
	_, err := s.Import(context.Background(), pr, OCI, Limits{MaxEntries: 1000})
	pr.CloseWithError(errors.New("done"))
	if !errors.Is(err, tarx.ErrTooLarge) {
		t.Fatalf("Import: %v", err)
	}
	if n := <-made; n > 1100 {
		t.Fatalf("the import read %d entries", n)
	}
	assertEmpty(t, s)
}

func TestImpliedDirectoriesCounted(t *testing.T) {
	// One entry whose name makes 30 directories, none of them an entry.
	data := newArchive().file(t, strings.Repeat("d/", 30)+"f", "x").bytes(t)
	refused(t, openStore(t), data, OCI, Limits{MaxEntries: 10}, tarx.ErrTooLarge)
	if _, err := openStore(t).Import(context.Background(), bytes.NewReader(data), OCI, Limits{MaxEntries: 31}); err != nil {
		t.Fatalf("within the bound: %v", err)
	}
}

func TestMalformed(t *testing.T) {
	var short bytes.Buffer
	tw := tar.NewWriter(&short)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "ok", Size: 2, Mode: 0o644})
	tw.Write([]byte("ok"))
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "short", Size: 100, Mode: 0o644})
	tw.Write([]byte("only ten b")) // and the stream ends

	// A header saying 10 bytes before a body of 1500: the rest of the
	// body is read as the next header.
	long := newArchive().file(t, "first", "x").file(t, "long", strings.Repeat("x", 1500)).bytes(t)
	hdr := long[1024 : 1024+512]
	copy(hdr[124:136], fmt.Sprintf("%011o\x00", 10))
	copy(hdr[148:156], "        ")
	sum := 0
	for _, c := range hdr {
		sum += int(c)
	}
	copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))

	// The archive cut after its last entry's data, where a block ends:
	// archive/tar reads it as ended.
	whole := newArchive().file(t, "f", "x").file(t, "g", strings.Repeat("y", 512)).bytes(t)
	cut := whole[:len(whole)-1024]
	for len(cut) > 0 && cut[len(cut)-1] == 0 {
		cut = cut[:len(cut)-512]
	}
	if _, err := tar.NewReader(bytes.NewReader(cut)).Next(); err != nil {
		t.Fatal(err)
	}

	trailing := append(newArchive().file(t, "f", "x").bytes(t), make([]byte, maxTrailing+1)...)
	for name, data := range map[string][]byte{
		"short body":    short.Bytes(),
		"long body":     long,
		"not a tar":     bytes.Repeat([]byte("not a tar archive "), 100),
		"empty":         nil,
		"trailing data": trailing,
		"no end blocks": cut,
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, openStore(t), data, Overlay, Limits{}, tarx.ErrMalformed)
		})
	}
	t.Run("name too long", func(t *testing.T) {
		data := newArchive().file(t, strings.Repeat("n", 300), "x").bytes(t)
		refused(t, openStore(t), data, Overlay, Limits{}, tarx.ErrMalformed)
	})
	t.Run("link target too long", func(t *testing.T) {
		data := newArchive().symlink(t, "l", strings.Repeat("n/", 3000)).bytes(t)
		refused(t, openStore(t), data, Overlay, Limits{}, tarx.ErrMalformed)
	})
	t.Run("owner out of range", func(t *testing.T) {
		data := newArchive().add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "f", Uid: 1 << 32, Format: tar.FormatPAX}, "x").bytes(t)
		refused(t, openStore(t), data, Overlay, Limits{}, tarx.ErrMalformed)
	})
}

func TestImportCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		for i := 0; ; i++ {
			if i == 100 {
				cancel()
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprint(i), Mode: 0o644, Size: 1}); err != nil {
				return
			}
			if _, err := tw.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	s := openStore(t)
	_, err := s.Import(ctx, pr, Overlay, Limits{})
	pr.Close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Import: %v", err)
	}
	assertEmpty(t, s)
}

// TestNoPrivilegeGained: a setuid or setgid bit is only ever the archive's
// for that entry. A setgid directory would hand its bit to a directory
// made in it (as mkdir does), and a hard link's header carries a mode of
// its own: neither gives anything.
func TestNoPrivilegeGained(t *testing.T) {
	for _, f := range []Format{Overlay, OCI} {
		data := newArchive().
			add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "g/", Mode: 0o2775, Gid: 50}, "").
			add(t, &tar.Header{Typeflag: tar.TypeDir, Name: "g/sub/", Mode: 0o755}, "").
			file(t, "g/implied/f", "x").
			file(t, "g/f", "x").
			add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "plain", Mode: 0o755}, "x").
			add(t, &tar.Header{Typeflag: tar.TypeLink, Name: "suid", Linkname: "plain", Mode: 0o6755}, "").
			add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "was-suid", Mode: 0o4755}, "x").
			add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "was-suid", Mode: 0o755}, "y").
			bytes(t)
		_, dir := mustImport(t, openStore(t), data, f)
		for name, want := range map[string]uint32{"g": 0o2775, "g/sub": 0o755, "g/implied": 0o755, "g/implied/f": 0o644, "g/f": 0o644, "plain": 0o755, "suid": 0o755, "was-suid": 0o755} {
			if st := lstatT(t, filepath.Join(dir, name)); st.Mode&0o7777 != want {
				t.Errorf("%v: %s: mode %o, want %o", f, name, st.Mode&0o7777, want)
			}
		}
		// The group a setgid directory gives what is made in it is
		// replaced by the entry's own.
		if st := lstatT(t, filepath.Join(dir, "g/f")); st.Gid != 0 {
			t.Errorf("%v: g/f: group %d, want the entry's 0", f, st.Gid)
		}
	}
}

// sparseBomb is a GNU sparse entry all hole: one header block announcing
// a file of size bytes that reads as zeros, and the archive's end.
func sparseBomb(t *testing.T, size int64) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "sparse", Mode: 0o644, Format: tar.FormatGNU}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	hdr := data[:512]
	hdr[156] = tar.TypeGNUSparse
	// The real size, in base-256 (GNU's form for what octal cannot hold).
	real := hdr[483:495]
	clear(real)
	binary.BigEndian.PutUint64(real[4:], uint64(size))
	real[0] = 0x80
	copy(hdr[148:156], "        ")
	sum := 0
	for _, c := range hdr {
		sum += int(c)
	}
	copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
	h, err := tar.NewReader(bytes.NewReader(data)).Next()
	if err != nil || h.Size != size || h.Typeflag != tar.TypeGNUSparse {
		t.Fatalf("the sparse header reads as %+v, %v", h, err)
	}
	return data
}

// TestSparseBomb: a few blocks can announce a terabyte of zeros, which a
// file system would store densely: the import stops at MaxBytes, on the
// header's word and, were that not counted, on the bytes written.
func TestSparseBomb(t *testing.T) {
	const max = 1 << 20
	data := sparseBomb(t, 1<<40)
	refused(t, openStore(t), data, OCI, Limits{MaxBytes: max}, tarx.ErrTooLarge)

	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	e := newExtractor(context.Background(), root, bytes.NewReader(data), OCI, Limits{MaxBytes: max})
	e.x = tarx.NewReader(bytes.NewReader(data), tarx.Options{}) // the announced count off
	if err := e.run(); !errors.Is(err, tarx.ErrTooLarge) {
		t.Fatalf("run: %v", err)
	}
	if fi, err := root.Stat("sparse"); err != nil || e.written > max || fi.Size() > max {
		t.Fatalf("wrote %d bytes (the file: %v, %v)", e.written, fi, err)
	}
}
