package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"strings"
	"testing"
)

// platformOf scans layers (tars, bottom first) and makes the platform
// layer.
func platformOf(t *testing.T, opts Options, layers ...[]byte) ([]byte, error) {
	t.Helper()
	tr := newTracker()
	for i, l := range layers {
		if err := tr.scanLayer(i, tar.NewReader(bytes.NewReader(l))); err != nil {
			t.Fatal(err)
		}
	}
	return tr.platformLayer(opts)
}

func mustPlatform(t *testing.T, opts Options, layers ...[]byte) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	b, err := platformOf(t, opts, layers...)
	if err != nil {
		t.Fatal(err)
	}
	h, body, _ := readTar(t, b)
	return h, body
}

const freshPasswd = "root:*:0:0:root:/root:/bin/sh\n" + userLine
const freshGroup = "root:x:0:\nuser:x:1000:\n"

func TestPlatformLayer(t *testing.T) {
	base := tarOf(t, dir("etc/", 0o755, 0, 0), file("etc/passwd", "root:x:0:0::/root:/bin/sh\n"), file("etc/group", "root:x:0:\n"))

	t.Run("empty image", func(t *testing.T) {
		h, body := mustPlatform(t, Options{CARoots: []byte("PEM")}, tarOf(t, file("app", "bin")))
		if body["etc/passwd"] != freshPasswd || body["etc/group"] != freshGroup {
			t.Errorf("passwd %q group %q", body["etc/passwd"], body["etc/group"])
		}
		for _, n := range []string{"etc/", "home/", "home/user/", "workspace/", "tmp/", "proc/", "dev/", "sys/", "opt/withruntime/", "run/withruntime/", "etc/hosts", "etc/hostname"} {
			if h[n] == nil {
				t.Errorf("no %s", n)
			}
		}
		if body["etc/ssl/certs/ca-certificates.crt"] != "PEM" {
			t.Errorf("CA roots not added to an image without any")
		}
		if h["etc/sudoers.d/withruntime"] != nil {
			t.Errorf("sudoers added to an image without sudo")
		}
	})
	t.Run("whiteout", func(t *testing.T) {
		_, body := mustPlatform(t, Options{}, base, tarOf(t, file("etc/.wh.passwd", "")))
		if body["etc/passwd"] != freshPasswd {
			t.Errorf("passwd %q, want a fresh one after a whiteout", body["etc/passwd"])
		}
		if body["etc/group"] != "root:x:0:\nuser:x:1000:\n" {
			t.Errorf("group %q", body["etc/group"])
		}
	})
	t.Run("opaque dir", func(t *testing.T) {
		_, body := mustPlatform(t, Options{}, base, tarOf(t, dir("etc/", 0o755, 0, 0), file("etc/.wh..wh..opq", ""), file("etc/group", "wheel:x:10:\n")))
		if body["etc/passwd"] != freshPasswd {
			t.Errorf("passwd %q, want a fresh one: the opaque /etc hid the lower one", body["etc/passwd"])
		}
		if body["etc/group"] != "wheel:x:10:\nuser:x:1000:\n" {
			t.Errorf("group %q, want the upper one appended", body["etc/group"])
		}
	})
	t.Run("passwd is a link", func(t *testing.T) {
		h, body := mustPlatform(t, Options{}, base, tarOf(t, symlink("etc/passwd", "/host/etc/passwd")))
		if body["etc/passwd"] != freshPasswd || h["etc/passwd"].Typeflag != tar.TypeReg {
			t.Errorf("passwd %q, want a fresh plain file in place of the link", body["etc/passwd"])
		}
	})
	t.Run("already has user", func(t *testing.T) {
		h, _ := mustPlatform(t, Options{}, tarOf(t, file("etc/passwd", "user:x:1000:1000::/home/user:/bin/bash\n"), file("etc/group", "user:x:1000:\n"),
			dir("workspace/", 0o700, 0, 0), dir("home/", 0o700, 0, 0), dir("home/user/", 0o700, 5, 5)))
		for _, n := range []string{"etc/passwd", "etc/group", "workspace/", "home/", "home/user/"} {
			if h[n] != nil {
				t.Errorf("the platform layer rewrote the image's %s", n)
			}
		}
	})
	t.Run("etc is a link", func(t *testing.T) {
		h, _ := mustPlatform(t, Options{CARoots: []byte("PEM")}, base, tarOf(t, symlink("etc", "private/etc"), file("usr/bin/sudo", "")))
		for n := range h {
			if strings.HasPrefix(n, "etc") {
				t.Errorf("the platform layer writes %s below the image's /etc link", n)
			}
		}
		if h["workspace/"] == nil {
			t.Errorf("no /workspace")
		}
	})
	t.Run("big passwd", func(t *testing.T) {
		big := tarOf(t, file("etc/passwd", strings.Repeat("x", maxAccountFile+1)))
		if _, err := platformOf(t, Options{}, big); !errors.Is(err, ErrInvalid) {
			t.Errorf("a passwd over the bound: err = %v, want ErrInvalid", err)
		}
		// Replaced by a small one above: fine.
		if _, err := platformOf(t, Options{}, big, base); err != nil {
			t.Errorf("a big passwd replaced by a small one: %v", err)
		}
	})
	t.Run("sudo", func(t *testing.T) {
		for name, l := range map[string][]byte{
			"binary":     tarOf(t, file("usr/bin/sudo", "")),
			"sudoers.d":  tarOf(t, dir("etc/sudoers.d/", 0o750, 0, 0)),
			"implied":    tarOf(t, file("etc/sudoers.d/README", "")),
			"bin (link)": tarOf(t, file("bin/sudo", "")),
		} {
			h, body := mustPlatform(t, Options{}, base, l)
			if body["etc/sudoers.d/withruntime"] != "user ALL=(ALL) NOPASSWD:ALL\n" {
				t.Errorf("%s: no sudoers entry", name)
			}
			if name == "sudoers.d" && h["etc/sudoers.d/"].Mode != 0o750 {
				t.Errorf("sudoers.d's mode changed to %o", h["etc/sudoers.d/"].Mode)
			}
		}
		h, _ := mustPlatform(t, Options{}, base, tarOf(t, file("usr/bin/sudo", "")), tarOf(t, file("usr/bin/.wh.sudo", "")))
		if h["etc/sudoers.d/withruntime"] != nil {
			t.Errorf("a sudoers entry though a whiteout removed sudo")
		}
	})
	t.Run("ca roots present", func(t *testing.T) {
		for _, p := range caBundles {
			h, _ := mustPlatform(t, Options{CARoots: []byte("PEM")}, base, tarOf(t, file(p, "image's")))
			for _, q := range caBundles {
				if h[q] != nil {
					t.Errorf("image with %s: the platform layer adds %s", p, q)
				}
			}
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		a, _ := platformOf(t, Options{}, base)
		b, _ := platformOf(t, Options{}, base)
		if !bytes.Equal(a, b) {
			t.Errorf("the same image made two platform layers")
		}
	})
}
