// Package volume keeps an account's named persistent volumes: each is a
// sparse ext4 image of its size on the host (DATA/volumes/<id>.img),
// loop-mounted (nosuid, nodev, noexec) under the server's run dir while the
// server runs, and bound by the gVisor backend into the sandboxes that
// mount it. The loop file system enforces the size (ENOSPC inside) and
// keeps hard links inside it.
//
// Everything in a mounted volume was written by a sandbox's root: the
// host reads and writes it (the files API) only through openat2 with
// RESOLVE_IN_ROOT, RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS and
// RESOLVE_NO_XDEV, never following a name the sandbox made, and reads
// only regular files and directories, bounded by the volume's size.
package volume

import (
	"path"
	"regexp"
	"strings"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// DefaultMaxSizeGiB is the largest volume a server makes unless told.
const DefaultMaxSizeGiB = 64

// MaxPerSandbox bounds the volumes one sandbox mounts.
const MaxPerSandbox = 8

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidName reports whether name may name a volume.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// CheckName is ValidName as an invalid_request error.
func CheckName(name string) error {
	if !ValidName(name) {
		return sandbox.Errorf(sandbox.KindInvalid, "bad volume name %q: 1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", name)
	}
	return nil
}

// reserved are the sandbox paths a volume must not shadow: the kernel's
// file systems, the run dir and the agent's own.
var reserved = []string{"/proc", "/sys", "/dev", "/run", "/opt/withruntime"}

// Mount is a volume asked for at create, by name.
type Mount struct {
	Name     string
	Path     string
	ReadOnly bool
}

// CheckMounts checks the volumes a create asks for: known-good names,
// absolute clean paths that shadow neither / nor a reserved path (or
// anything under one), each path and name once.
func CheckMounts(ms []Mount) error {
	if len(ms) > MaxPerSandbox {
		return sandbox.Errorf(sandbox.KindInvalid, "at most %d volumes per sandbox", MaxPerSandbox)
	}
	paths := map[string]bool{}
	names := map[string]bool{}
	for _, m := range ms {
		if err := CheckName(m.Name); err != nil {
			return err
		}
		if err := CheckPath(m.Path); err != nil {
			return err
		}
		if names[m.Name] {
			return sandbox.Errorf(sandbox.KindInvalid, "volume %s is mounted twice", m.Name)
		}
		for p := range paths {
			if within(m.Path, p) || within(p, m.Path) {
				return sandbox.Errorf(sandbox.KindInvalid, "volume paths %s and %s overlap", p, m.Path)
			}
		}
		paths[m.Path], names[m.Name] = true, true
	}
	return nil
}

// CheckPath checks one in-sandbox mount path.
func CheckPath(p string) error {
	switch {
	case p == "" || p[0] != '/' || path.Clean(p) != p || strings.ContainsRune(p, 0) || len(p) > 1024:
		return sandbox.Errorf(sandbox.KindInvalid, "bad volume path %q: it must be absolute and clean", p)
	case p == "/":
		return sandbox.Errorf(sandbox.KindInvalid, "a volume must not be mounted at /")
	}
	for _, r := range reserved {
		if within(p, r) {
			return sandbox.Errorf(sandbox.KindInvalid, "a volume must not be mounted at %s: %s is the system's", p, r)
		}
	}
	return nil
}

// within reports whether p is dir or under it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
