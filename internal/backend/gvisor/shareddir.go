package gvisor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"syscall"
)

// The shared checkpoint dir is written by every node of the installation
// (and whatever else can write its mount), and this process is root: a
// path in it is never followed blindly. Every access goes through a
// descriptor of the shared root (os.Root: no path escapes it), a
// sandbox's dir must be a real directory (not a symlink to another's or
// anywhere else), and runsc is given the directory it was checked as
// (/proc/PID/fd/N), not a path that could be swapped under it.

// checkpointDir is the name of the checkpoint inside SHARED/<id>.
const checkpointDir = "checkpoint"

// validID reports whether id is a sandbox id as the manager makes them
// ("sbx" and 16 hex digits): the only names a shared path is built from.
func validID(id string) bool {
	if len(id) != 19 || id[:3] != "sbx" {
		return false
	}
	_, err := hex.DecodeString(id[3:])
	return err == nil
}

// openSharedRoot checks and opens the shared checkpoint dir: a directory
// owned by root that neither group nor others can write (else anyone who
// can would plant names in it for this root process to follow).
func openSharedRoot(dir string) (*os.Root, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	fi, err := r.Stat(".")
	if err == nil {
		err = checkOwned(dir, fi)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func checkOwned(dir string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case !ok || st.Uid != 0:
		return fmt.Errorf("%s must be owned by root", dir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s must not be writable by group or others (mode %v)", dir, fi.Mode().Perm())
	}
	return nil
}

// errNotDir is the refusal of a name in the shared dir that is not a real
// directory.
func errNotDir(name string, mode fs.FileMode) error {
	return fmt.Errorf("shared checkpoint dir: %s is not a directory (%v): refusing to use it", name, mode.Type())
}

// openDir opens name under r if it is a real directory, and checks that
// what was opened is what was looked at (a swap in between is refused).
func openDir(r *os.Root, name string) (*os.Root, error) {
	fi, err := r.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, errNotDir(name, fi.Mode())
	}
	d, err := r.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	if got, err := d.Stat("."); err != nil || !os.SameFile(fi, got) {
		d.Close()
		return nil, fmt.Errorf("shared checkpoint dir: %s changed while it was opened: refusing to use it", name)
	}
	return d, nil
}

// sharedFor opens SHARED/<id>, which must be a real directory.
func (b *Backend) sharedFor(id string) (*os.Root, error) {
	if !validID(id) {
		return nil, fmt.Errorf("shared checkpoint dir: %q is not a sandbox id", id)
	}
	return openDir(b.shared, id)
}

// freshShared empties SHARED/<id> (refusing anything there that is not a
// real directory) and returns its new checkpoint dir, opened.
func (b *Backend) freshShared(id string) (*os.File, error) {
	if err := b.removeShared(id); err != nil {
		return nil, err
	}
	if err := b.shared.Mkdir(id, 0o700); err != nil {
		return nil, err
	}
	d, err := b.sharedFor(id)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := d.Mkdir(checkpointDir, 0o700); err != nil {
		return nil, err
	}
	return openDirFile(d, checkpointDir)
}

// openDirFile opens the real directory name under r as a file, for runsc.
func openDirFile(r *os.Root, name string) (*os.File, error) {
	cd, err := openDir(r, name)
	if err != nil {
		return nil, err
	}
	defer cd.Close()
	return cd.Open(".")
}

// sharedCheckpointFile opens SHARED/<id>/checkpoint; nil, nil when there
// is none.
func (b *Backend) sharedCheckpointFile(id string) (*os.File, error) {
	d, err := b.sharedFor(id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, err := openDirFile(d, checkpointDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return f, err
}

// removeShared removes SHARED/<id>: a real directory, never what a
// symlink or another kind of file there points to (it is refused and left).
func (b *Backend) removeShared(id string) error {
	if !validID(id) {
		return fmt.Errorf("shared checkpoint dir: %q is not a sandbox id", id)
	}
	fi, err := b.shared.Lstat(id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errNotDir(id, fi.Mode())
	}
	// Root.RemoveAll removes links inside as links: it follows none.
	return b.shared.RemoveAll(id)
}

// fdPath names the directory f for a child process: the kernel resolves
// it to that very directory, whatever its path became since.
func fdPath(f *os.File) string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.FormatUint(uint64(f.Fd()), 10)
}

// digestDir returns the SHA-256 of a checkpoint: of every file in dir by
// name, with its size and contents. Anything there but regular files is
// refused: runsc writes none.
func digestDir(dir *os.File) (string, error) {
	r, err := os.OpenRoot(fdPath(dir))
	if err != nil {
		return "", err
	}
	defer r.Close()
	entries, err := dir.ReadDir(-1)
	if _, serr := dir.Seek(0, io.SeekStart); err == nil {
		err = serr
	}
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	h := sha256.New()
	for _, name := range names {
		fi, err := r.Lstat(name)
		if err != nil {
			return "", err
		}
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("checkpoint holds %s, which is not a regular file (%v)", name, fi.Mode().Type())
		}
		f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return "", err
		}
		fh := sha256.New()
		n, err := io.Copy(fh, f)
		f.Close()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%q %d %x\n", name, n, fh.Sum(nil))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
