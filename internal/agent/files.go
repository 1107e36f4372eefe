package agent

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/api"
)

// handleRead streams a file, read as ?user=. It follows symlinks: reading
// through one writes nothing.
func (s *Server) handleRead(w http.ResponseWriter, r *http.Request) error {
	return s.asUser(w, r, s.read)
}

func (s *Server) read(w http.ResponseWriter, r *http.Request, _ identity) error {
	path, err := s.pathParam(r)
	if err != nil {
		return err
	}
	// Stat before opening: opening a FIFO would block.
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return conflictf("%s is a directory", path)
	}
	if !fi.Mode().IsRegular() {
		return conflictf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if synthetic(f, fi) {
		// The kernel makes such a file's content as it is read: its size
		// says nothing and it cannot seek to its end, which ServeContent
		// needs, so it streams without a length or ranges.
		io.Copy(w, f) // a read that breaks midway can only cut the body short
		return nil
	}
	// ServeContent sets Content-Length and answers HEAD and Range requests.
	http.ServeContent(w, r, "", fi.ModTime(), f)
	return nil
}

// synthetic reports whether f, a regular file, is one the kernel generates
// as it is read (procfs, sysfs): those report a size of 0 or a page, never
// their content's.
func synthetic(f *os.File, fi fs.FileInfo) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err == nil && (st.Type == unix.PROC_SUPER_MAGIC || st.Type == unix.SYSFS_MAGIC) {
		return true
	}
	if fi.Size() != 0 {
		return false
	}
	// An empty regular file elsewhere may still be one that cannot seek.
	_, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return true
	}
	_, err = f.Seek(0, io.SeekStart)
	return err != nil
}

// handleWrite writes the body, as ?user= (the sandbox user by default, or
// root), to a temporary file beside path and renames it over path. A
// symlink at path is replaced, never written through. A new file, and each
// parent made for it, belongs to the user. One that replaces a regular
// file keeps that file's owner where the user may give it away (root);
// replacing another's file needs the kernel's leave to write that file,
// and the new one then belongs to the user, as after a rename of its own.
func (s *Server) handleWrite(w http.ResponseWriter, r *http.Request) error {
	return s.asUser(w, r, s.write)
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, user identity) (retErr error) {
	path, err := s.pathParam(r)
	if err != nil {
		return err
	}
	mode, err := modeParam(r)
	if err != nil {
		return err
	}
	attrs, err := attrParams(r)
	if err != nil {
		return err
	}
	if r.ContentLength > api.MaxFileBody {
		return &http.MaxBytesError{Limit: api.MaxFileBody}
	}
	uid, gid := user.uid, user.gid
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.IsDir():
		return conflictf("%s is a directory", path)
	case err == nil && fi.Mode().IsRegular():
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
		if uid != user.uid && !user.actsAsRoot() {
			// The rename below needs only the directory's leave; the
			// kernel must also allow this user to write the file itself.
			if err := mayWrite(path); err != nil {
				return err
			}
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return err
	}
	dir := filepath.Dir(path)
	if err := mkdirsOwned(dir, user.uid, user.gid); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".withruntime-upload-*")
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, http.MaxBytesReader(w, r.Body, api.MaxFileBody)); err != nil {
		return err
	}
	// Set while the file is still the agent's: a write replaces the file,
	// so it keeps none of the attributes the old one had.
	if err := setAttrs(tmp, attrs); err != nil {
		return err
	}
	// A user may not give a file away: then it stays the user's.
	if err := tmp.Chown(uid, gid); err != nil && (user.actsAsRoot() || !errors.Is(err, fs.ErrPermission)) {
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	info, err := statInfo(path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// mayWrite asks the kernel whether the calling thread may write the
// regular file path, by opening it for writing (no O_TRUNC, no O_CREAT:
// the file is left as it is).
func mayWrite(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// modeParam reads ?mode= as octal permission bits; the default is 0644.
func modeParam(r *http.Request) (fs.FileMode, error) {
	v := r.URL.Query().Get("mode")
	if v == "" {
		return 0o644, nil
	}
	m, err := strconv.ParseUint(strings.TrimPrefix(v, "0o"), 8, 32)
	if err != nil || m > 0o777 {
		return 0, invalidf("mode must be octal permission bits (0 to 0777), not %q", v)
	}
	return fs.FileMode(m), nil
}

// handleRemove removes, as ?user=, a file, a symlink (not its target), an
// empty directory, or with recursive=true a whole tree. It refuses "/" and
// the workspace itself.
func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request) error {
	return s.asUser(w, r, s.remove)
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request, _ identity) error {
	path, err := s.pathParam(r)
	if err != nil {
		return err
	}
	recursive, err := queryBool(r, "recursive")
	if err != nil {
		return err
	}
	if path == "/" || path == s.cfg.Workspace {
		return invalidf("refusing to remove %s", path)
	}
	if _, err := os.Lstat(path); err != nil {
		return err
	}
	if recursive {
		err = os.RemoveAll(path)
	} else {
		err = os.Remove(path)
	}
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return conflictf("%s is a directory that is not empty: remove it with recursive=true", path)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
