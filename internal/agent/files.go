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

	"github.com/withruntime/withruntime/api"
)

// handleRead streams a file. It follows symlinks: reading through one
// writes nothing.
func (s *Server) handleRead(w http.ResponseWriter, r *http.Request) error {
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
	// ServeContent sets Content-Length and answers HEAD and Range requests.
	http.ServeContent(w, r, "", fi.ModTime(), f)
	return nil
}

// handleWrite writes the body to a temporary file beside path and renames
// it over path. A symlink at path is replaced, never written through. A new
// file, and each parent made for it, belongs to ?user= (the sandbox user
// by default, or root); one that replaces a regular file keeps that file's
// owner.
func (s *Server) handleWrite(w http.ResponseWriter, r *http.Request) (retErr error) {
	path, err := s.pathParam(r)
	if err != nil {
		return err
	}
	mode, err := modeParam(r)
	if err != nil {
		return err
	}
	if r.ContentLength > api.MaxFileBody {
		return &http.MaxBytesError{Limit: api.MaxFileBody}
	}
	user, err := s.userParam(r)
	if err != nil {
		return err
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
	if err := tmp.Chown(uid, gid); err != nil {
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

// handleRemove removes a file, a symlink (not its target), an empty
// directory, or with recursive=true a whole tree. It refuses "/" and the
// workspace itself.
func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request) error {
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
