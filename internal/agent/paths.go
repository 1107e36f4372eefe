package agent

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/withruntime/withruntime/api"
)

// resolve turns a client's path into an absolute, clean path in the
// sandbox: relative paths are under the workspace. It refuses empty paths,
// NUL bytes and ".." components rather than guess what they meant.
func (s *Server) resolve(p string) (string, error) {
	if p == "" {
		return "", invalidf("path is required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", invalidf("path contains a NUL byte")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", invalidf("path %q must not contain \"..\"", p)
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.cfg.Workspace, p)
	}
	return filepath.Clean(p), nil
}

// pathParam resolves ?path= and checks ?user=, which every files route
// takes.
func (s *Server) pathParam(r *http.Request) (string, error) {
	if _, err := s.userParam(r); err != nil {
		return "", err
	}
	return s.resolve(r.URL.Query().Get("path"))
}

// mkdirs makes dir and its missing parents, giving the ones it makes to
// the sandbox user.
func (s *Server) mkdirs(dir string) error {
	return mkdirsOwned(dir, s.cfg.UID, s.cfg.GID)
}

// mkdirsOwned makes dir and its missing parents, giving the ones it makes
// to uid and gid.
func mkdirsOwned(dir string, uid, gid int) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return conflictf("%s exists and is not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirsOwned(parent, uid, gid); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return mkdirsOwned(dir, uid, gid) // made meanwhile, or a file: look again
		}
		return err
	}
	return os.Lchown(dir, uid, gid)
}

// statInfo describes path without following a final symlink.
func statInfo(path string) (api.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return api.FileInfo{}, err
	}
	return fileInfo(path, fi), nil
}

func fileInfo(path string, fi fs.FileInfo) api.FileInfo {
	info := api.FileInfo{
		Name:    fi.Name(),
		Path:    path,
		Type:    api.FileTypeOther,
		Size:    fi.Size(),
		Mode:    unixMode(fi.Mode()),
		ModTime: fi.ModTime().UTC(),
		Attrs:   readAttrs(path),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.Owner, info.Group = ownerGroup(st.Uid, st.Gid)
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		info.Type = api.FileTypeFile
	case m.IsDir():
		info.Type = api.FileTypeDir
	case m&fs.ModeSymlink != 0:
		info.Type = api.FileTypeSymlink
		info.Target, _ = os.Readlink(path)
	}
	return info
}

// unixMode is the permission bits of m as chmod writes them.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}
