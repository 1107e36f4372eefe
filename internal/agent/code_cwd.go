package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinkHops is Linux's bound on the symlinks one lookup follows.
const maxSymlinkHops = 40

// enterableAs reports whether uid and gid, with no supplementary groups
// (as the agent starts processes), may make dir their cwd, deciding the
// way the kernel does: search permission on every directory on the way
// and on dir itself, symlinks followed. The agent runs as root, for whom
// a stat proves nothing: a context whose kernel cannot start in its cwd
// would fail every cell. ACLs are not read: the mode bits decide.
func enterableAs(dir string, uid, gid int) error {
	if uid == 0 {
		return nil
	}
	rest := strings.Split(dir, "/")
	cur, hops := "/", 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		if err := searchableAs(cur, uid, gid); err != nil {
			return err
		}
		if name == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxSymlinkHops {
			return &os.PathError{Op: "chdir", Path: dir, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return searchableAs(cur, uid, gid)
}

// searchableAs checks that uid and gid may search the directory dir,
// which is no symlink: the owner's bits apply to its owner, else the
// group's to its group, else the others'.
func searchableAs(dir string, uid, gid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("no owner for %s", dir)
	}
	if !fi.IsDir() {
		return &os.PathError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR}
	}
	bit := uint32(0o001)
	switch {
	case int(st.Uid) == uid:
		bit = 0o100
	case int(st.Gid) == gid:
		bit = 0o010
	}
	if st.Mode&bit == 0 {
		return &os.PathError{Op: "chdir", Path: dir, Err: syscall.EACCES}
	}
	return nil
}

// checkContextCwd is a new context's cwd check as the sandbox user.
func (s *Server) checkContextCwd(dir string) error {
	err := enterableAs(dir, s.cfg.UID, s.cfg.GID)
	if err == nil {
		return nil
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return invalidf("cwd %.300s cannot be entered by the sandbox user: %v", dir, err)
}
