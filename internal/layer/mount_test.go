package layer

import (
	"archive/tar"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/template"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// mountRoot calls Root and releases it when the test ends.
func mountRoot(t *testing.T, lowers []string) string {
	t.Helper()
	target := filepath.Join(t.TempDir(), "root")
	root, release, err := Root(target, lowers)
	if err != nil {
		t.Fatalf("Root: %v", err)
	}
	t.Cleanup(func() {
		if err := release(); err != nil {
			t.Error(err)
		}
		if len(lowers) > 1 {
			if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("release left %s: %v", target, err)
			}
		}
	})
	return root
}

// mountOptions returns the options of the mount at target, from
// /proc/self/mountinfo.
func mountOptions(t *testing.T, target string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == target {
			return f[5]
		}
	}
	t.Fatalf("%s is not mounted", target)
	return ""
}

func TestRootThreeLayers(t *testing.T) {
	s := openStore(t)
	_, bottom := mustImport(t, s, newArchive().
		dir(t, "etc/").file(t, "etc/a", "a").file(t, "etc/b", "b").
		dir(t, "dir/").file(t, "dir/x", "x").file(t, "dir/y", "y").
		add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "bin/su", Mode: 0o4755, Uid: 0, Gid: 0}, "su").
		add(t, &tar.Header{Typeflag: tar.TypeReg, Name: "home/u/f", Mode: 0o640, Uid: 1234, Gid: 4321}, "f").
		bytes(t), OCI)
	_, middle := mustImport(t, s, newArchive().
		add(t, &tar.Header{Typeflag: tar.TypeChar, Name: "./etc/b"}, "").
		file(t, "./etc/c", "c").
		bytes(t), Overlay)
	_, top := mustImport(t, s, newArchive().
		dir(t, "dir/").file(t, "dir/.wh..wh..opq", "").file(t, "dir/z", "z").
		file(t, ".wh.bin", "").
		bytes(t), OCI)
	root := mountRoot(t, []string{top, middle, bottom})

	if got := names(t, filepath.Join(root, "etc")); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("etc: %v, want [a c]", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("etc/b, removed in the middle layer: %v", err)
	}
	if got := names(t, filepath.Join(root, "dir")); !slices.Equal(got, []string{"z"}) {
		t.Errorf("dir: %v, want [z] (opaque in the top layer)", got)
	}
	if got := names(t, root); !slices.Equal(got, []string{"dir", "etc", "home"}) {
		t.Errorf("/: %v, want [dir etc home]", got)
	}
	fi, err := os.Lstat(filepath.Join(root, "home/u/f"))
	if err != nil {
		t.Fatal(err)
	}
	if st := lstatT(t, filepath.Join(root, "home/u/f")); st.Uid != 1234 || st.Gid != 4321 || fi.Mode().Perm() != 0o640 {
		t.Errorf("home/u/f: %d:%d %v", st.Uid, st.Gid, fi.Mode())
	}
	opts := mountOptions(t, root)
	for _, want := range []string{"ro", "nosuid", "nodev"} {
		if !slices.Contains(strings.Split(opts, ","), want) {
			t.Errorf("mount options %q lack %s", opts, want)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "new"), nil, 0o644); err == nil {
		t.Error("the root is writable")
	}
	// The bottom layer alone shows setuid su as the image had it: its path
	// is under the store's 0700 directories.
	if fi, err := os.Lstat(filepath.Join(bottom, "bin/su")); err != nil || fi.Mode()&fs.ModeSetuid == 0 {
		t.Errorf("bin/su in the layer: %v, %v", fi, err)
	}
}

func TestRootOneDirectory(t *testing.T) {
	s := openStore(t)
	_, dir := mustImport(t, s, newArchive().file(t, "f", "x").bytes(t), OCI)
	target := filepath.Join(t.TempDir(), "root")
	root, release, err := Root(target, []string{dir, dir})
	if err != nil || root != dir {
		t.Fatalf("Root: %q, %v; want the layer itself", root, err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("target made for no mount: %v", err)
	}
	if _, _, err := Root(target, nil); err == nil {
		t.Fatal("Root of nothing: no error")
	}
	if _, _, err := Root(target, []string{"relative/dir", dir}); err == nil {
		t.Fatal("Root of a relative path: no error")
	}
}

func TestRootOpaqueRootHidesBelow(t *testing.T) {
	s := openStore(t)
	_, bottom := mustImport(t, s, newArchive().file(t, "old", "o").bytes(t), OCI)
	_, middle := mustImport(t, s, newArchive().file(t, ".wh..wh..opq", "").file(t, "mid", "m").bytes(t), OCI)
	_, top := mustImport(t, s, newArchive().file(t, "top", "t").bytes(t), OCI)
	root := mountRoot(t, []string{top, middle, bottom})
	if got := names(t, root); !slices.Equal(got, []string{"mid", "top"}) {
		t.Fatalf("/: %v, want [mid top]", got)
	}
	if root, _, err := Root(filepath.Join(t.TempDir(), "r"), []string{middle, bottom}); err != nil || root != middle {
		t.Fatalf("Root: %q, %v; want the opaque layer alone", root, err)
	}
}

// TestRootMaxLayers mounts a template's most layers over a base under a
// cache directory so deep that their paths exceed the mount's page.
func TestRootMaxLayers(t *testing.T) {
	cache := filepath.Join(t.TempDir(), strings.Repeat("a-rather-long-cache-directory/", 6))
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(cache)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(cache, "base")
	if err := os.MkdirAll(filepath.Join(base, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "etc/base"), []byte("base"), 0o644); err != nil {
		t.Fatal(err)
	}
	lowers := []string{base}
	for i := range template.MaxLayers + 1 {
		_, dir := mustImport(t, s, newArchive().file(t, fmt.Sprintf("f%02d", i), "x").file(t, "top", fmt.Sprint(i)).bytes(t), OCI)
		lowers = append([]string{dir}, lowers...)
	}
	if n := len("lowerdir=" + strings.Join(lowers, ":")); n <= maxMountData {
		t.Fatalf("the paths take %d bytes: the test must exceed a page", n)
	}
	root := mountRoot(t, lowers)
	got := names(t, root)
	if len(got) != template.MaxLayers+3 { // f00..f32, etc, top
		t.Fatalf("/: %d names: %v", len(got), got)
	}
	if b, err := os.ReadFile(filepath.Join(root, "top")); err != nil || string(b) != fmt.Sprint(template.MaxLayers) {
		t.Fatalf("top: %q, %v; want the topmost layer's", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/base")); err != nil || string(b) != "base" {
		t.Fatalf("etc/base: %q, %v", b, err)
	}
}

// TestRunscUpperLayer imports a real `runsc tar rootfs-upper` of a
// sandbox (testdata/runsc-upper.tar) and mounts it over a base that has
// what the sandbox removed. The sandbox ran, over the default image:
//
//	echo new > /etc/newfile; rm /etc/bash.bashrc; rm -rf /etc/apt; mkdir /etc/apt;
//	echo x > /etc/apt/only; mkfifo /etc/fifo; printf "#!/bin/sh\n" > /usr/local/bin/suid;
//	chmod 4755 /usr/local/bin/suid; ln /etc/newfile /etc/hardlink; ln -s /etc/newfile /etc/sym;
//	chown 1234:5678 /etc/newfile; touch -d 2020-01-02T03:04:05Z /etc/newfile; touch /.rootfile
func TestRunscUpperLayer(t *testing.T) {
	data, err := os.ReadFile("testdata/runsc-upper.tar")
	if err != nil {
		t.Fatal(err)
	}
	_, upper := mustImport(t, openStore(t), data, Overlay)
	base := t.TempDir()
	for name, body := range map[string]string{"etc/bash.bashrc": "rc", "etc/apt/sources.list": "deb", "etc/hosts": "127.0.0.1", "usr/local/bin/.keep": ""} {
		if err := os.MkdirAll(filepath.Join(base, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := mountRoot(t, []string{upper, base})
	if got := names(t, filepath.Join(root, "etc")); !slices.Equal(got, []string{"apt", "hardlink", "hosts", "newfile", "sym"}) {
		t.Errorf("etc: %v, want [apt hardlink hosts newfile sym] (bash.bashrc removed, the FIFO dropped)", got)
	}
	if got := names(t, filepath.Join(root, "etc/apt")); !slices.Equal(got, []string{"only"}) {
		t.Errorf("etc/apt: %v, want [only] (made anew in the sandbox)", got)
	}
	nf, hl := lstatT(t, filepath.Join(root, "etc/newfile")), lstatT(t, filepath.Join(root, "etc/hardlink"))
	if nf.Ino != hl.Ino || nf.Uid != 1234 || nf.Gid != 5678 {
		t.Errorf("etc/newfile %d %d:%d, etc/hardlink %d", nf.Ino, nf.Uid, nf.Gid, hl.Ino)
	}
	if got, want := time.Unix(nf.Mtim.Unix()), time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC); !got.Equal(want) {
		t.Errorf("etc/newfile: mtime %v, want %v", got, want)
	}
	if st := lstatT(t, filepath.Join(root, "usr/local/bin/suid")); st.Mode&0o7777 != 0o4755 {
		t.Errorf("suid: mode %o", st.Mode)
	}
	if l, err := os.Readlink(filepath.Join(root, "etc/sym")); err != nil || l != "/etc/newfile" {
		t.Errorf("etc/sym -> %q, %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(root, ".rootfile")); err != nil {
		t.Error(err)
	}
}
