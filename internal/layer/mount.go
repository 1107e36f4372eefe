package layer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxMountData is what the kernel copies of mount(2)'s data: one page,
// its NUL included.
const maxMountData = 4096 - 1

// Root returns the root file system made of the directories lowers, top
// first (overlayfs's order: the template's layers from the newest down,
// then its base's rootfs), read-only.
//
// Directories above a lower whose root is opaque (an OCI layer with
// .wh..wh..opq at its top) hide everything beneath it, so those beneath
// are left out; a directory named twice is used at its topmost place
// only (the same layer lower down adds nothing to it). One directory
// left is root itself, with no mount. More are an overlay mounted on
// target (made 0700 when missing) with nosuid and nodev: a setuid file of
// an image gains nothing on the host through it.
//
// release unmounts (detaching when busy) and removes target if Root
// made it; with no mount it does nothing. The caller keeps target where
// no one else may reach it.
func Root(target string, lowers []string) (root string, release func() error, err error) {
	if len(lowers) == 0 {
		return "", nil, errors.New("layer: a root of no directories")
	}
	var dirs []string
	seen := map[string]bool{}
	for _, d := range lowers {
		if !filepath.IsAbs(d) {
			return "", nil, fmt.Errorf("layer: lower directory %q is not absolute", d)
		}
		d = filepath.Clean(d)
		if seen[d] {
			continue
		}
		seen[d] = true
		dirs = append(dirs, d)
		opaque, err := rootOpaque(d)
		if err != nil {
			return "", nil, err
		}
		if opaque {
			break
		}
	}
	if len(dirs) == 1 {
		fi, err := os.Stat(dirs[0])
		if err != nil {
			return "", nil, err
		}
		if !fi.IsDir() {
			return "", nil, fmt.Errorf("layer: %s is not a directory", dirs[0])
		}
		return dirs[0], func() error { return nil }, nil
	}
	made := false
	if err := os.Mkdir(target, 0o700); err == nil {
		made = true
	} else if !errors.Is(err, fs.ErrExist) {
		return "", nil, err
	}
	if err := mountOverlay(target, dirs); err != nil {
		if made {
			os.Remove(target)
		}
		return "", nil, err
	}
	release = func() error {
		err := unix.Unmount(target, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(target, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: not mounted (released already)
			return fmt.Errorf("unmounting %s: %w", target, err)
		}
		if made {
			if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	return target, release, nil
}

// rootOpaque says whether the directory dir is marked opaque.
func rootOpaque(dir string) (bool, error) {
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(dir, opaqueXattr, buf)
	switch {
	case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("layer: reading %s's xattrs: %w", dir, err)
	}
	return string(buf[:n]) == "y", nil
}

// overlayOptions turn off what a lower layer's own xattrs could ask of
// overlayfs (a redirect to another directory, metadata-only copies): the
// extraction keeps no such xattr, and a base rootfs has none either.
const overlayOptions = ",redirect_dir=nofollow,metacopy=off"

func mountOverlay(target string, dirs []string) error {
	data := "lowerdir=" + strings.Join(dirs, ":") + overlayOptions
	plain := len(data) <= maxMountData
	for _, d := range dirs {
		if strings.ContainsAny(d, `:,\`) {
			plain = false
		}
	}
	if plain {
		return mount(target, data)
	}
	// The paths are too long for one page (a deep cache directory and
	// 33 lowers of 64-hex names), or hold what the option syntax
	// escapes: name each directory by a descriptor this process holds
	// open, which overlayfs resolves when it mounts.
	names := make([]string, len(dirs))
	for i, d := range dirs {
		f, err := os.OpenFile(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		names[i] = "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	}
	data = "lowerdir=" + strings.Join(names, ":") + overlayOptions
	if len(data) > maxMountData {
		return fmt.Errorf("layer: %d lower directories do not fit one overlay mount", len(dirs))
	}
	return mount(target, data)
}

func mount(target, data string) error {
	if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mounting the overlay on %s: %w", target, err)
	}
	return nil
}

// StackKey names a stack of layers over a base ("" for none), for what is
// made of the whole stack once (a microVM's disk of a template): the hex
// sha256 of the base and the digests, lowest first.
func StackKey(base string, layers []string) string {
	h := sha256.New()
	io.WriteString(h, base)
	for _, d := range layers {
		io.WriteString(h, "\n"+d)
	}
	return hex.EncodeToString(h.Sum(nil))
}
