package agent

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/tarx"
	"golang.org/x/sys/unix"
)

// maxEntrySize bounds one archive entry.
const maxEntrySize = 16 << 30

// maxArchiveEntries bounds the entries of one archive, every header
// counted (directories and skipped ones too). The stream is read as it
// comes and holds no memory per entry; the bound is on the time one
// request may take (a million empty files took 90 s on a host's own
// file system, longer under gVisor) and the inodes it may make. Past it
// the extraction stops with payload_too_large, the entries before it in
// place: send a larger tree as several archives.
const maxArchiveEntries = 500_000

// handleArchivePut extracts a tar stream into the directory path (made if
// missing), as ?user= and owned by that user. See extractor for what it
// refuses.
func (s *Server) handleArchivePut(w http.ResponseWriter, r *http.Request) error {
	return s.asUser(w, r, s.archivePut)
}

func (s *Server) archivePut(w http.ResponseWriter, r *http.Request, user identity) error {
	dest, err := s.pathParam(r)
	if err != nil {
		return err
	}
	if err := mkdirsOwned(dest, user.uid, user.gid); err != nil {
		return err
	}
	x := &extractor{dest: dest, uid: user.uid, gid: user.gid, root: user.actsAsRoot()}
	if err := x.extract(r.Body); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, x.res)
	return nil
}

// extractor writes a tar's entries under dest with the shared extractor
// (internal/tarx, on an os.Root), owned by uid:gid with their permission
// bits (0777 at most). It stops at the first entry it refuses, leaving the
// entries before it in place: absolute names, ".." components, NUL bytes,
// entries whose parent inside dest is a symlink (a symlink entry is fine,
// but nothing is ever written through one), hard links to anything but a
// regular file inside dest, devices, FIFOs and any other kind but a file,
// a directory or a link, and the entry past maxArchiveEntries. An entry
// replaces a file or symlink at its name, never a directory. A refused
// entry itself leaves nothing: its kind and name are checked before its
// parents are made. Undoing the entries before it is not attempted: they
// may have replaced files whose old contents are gone, and the stream
// cannot be checked whole before it is written without holding it all.
//
// The checks guard against the archive, not against processes in the
// sandbox racing it: those run as a user with sudo anyway. The extraction
// runs on the calling goroutine, which holds the user's credentials.
type extractor struct {
	dest     string
	uid, gid int
	// root says the extraction runs as root, which may give a directory
	// that is already there to uid; a user leaves another's as it is.
	root bool
	res  api.ArchiveResult
	// max bounds the entries; 0 is maxArchiveEntries.
	max int
}

func (x *extractor) extract(r io.Reader) error {
	limit := x.max
	if limit == 0 {
		limit = maxArchiveEntries
	}
	root, err := os.OpenRoot(x.dest)
	if err != nil {
		return err
	}
	defer root.Close()
	owner := &tarx.Owner{UID: x.uid, GID: x.gid, LinkTimes: linkTimes}
	if !x.root {
		owner.TakesOver = func(fi fs.FileInfo) bool { return owns(fi, x.uid) }
	}
	tr := tarx.NewReader(r, tarx.Options{MaxEntries: limit, MaxEntrySize: maxEntrySize, Owner: owner})
	err = tr.Extract(root, nil, "")
	x.res.Files, x.res.Bytes = tr.Files, tr.Bytes
	var te *tarx.Error
	switch {
	case !errors.As(err, &te):
		return err
	case te.Kind == tarx.ErrTooLarge:
		return &reqError{codeTooLarge, "archive has " + te.Msg + ": send a larger tree as several archives"}
	}
	return invalidf("%s", te.Msg)
}

// linkTimes sets a symlink's times to t without following it, through
// its parent directory opened in root.
func linkTimes(root *os.Root, name string, t time.Time) error {
	dir, err := root.Open(filepath.Dir(filepath.FromSlash(name)))
	if err != nil {
		return err
	}
	defer dir.Close()
	ts := unix.NsecToTimespec(t.UnixNano())
	return unix.UtimesNanoAt(int(dir.Fd()), filepath.Base(name), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

// owns reports whether fi belongs to uid.
func owns(fi fs.FileInfo, uid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// ownedBy reports whether path, not followed, belongs to uid.
func ownedBy(path string, uid int) bool {
	fi, err := os.Lstat(path)
	return err == nil && owns(fi, uid)
}
