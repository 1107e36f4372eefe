package agent

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/withruntime/withruntime/api"
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

// extractor writes a tar's entries under dest, owned by uid:gid with their
// permission bits (0777 at most). It stops at the first entry it refuses,
// leaving the entries before it in place: absolute names, ".." components,
// NUL bytes, entries whose parent inside dest is a symlink (a symlink entry
// is fine, but nothing is ever written through one), hard links to
// anything but a regular file inside dest, devices, FIFOs and any other
// kind but a file, a directory or a link, and the entry past
// maxArchiveEntries. An entry replaces a file or symlink at its name,
// never a directory. A refused entry itself leaves nothing: its kind and
// name are checked before its parents are made. Undoing the entries before
// it is not attempted: they may have replaced files whose old contents are
// gone, and the stream cannot be checked whole before it is written
// without holding it all.
//
// The checks guard against the archive, not against processes in the
// sandbox racing it: those run as a user with sudo anyway.
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
	tr := tar.NewReader(r)
	for n := 1; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return invalidf("reading archive: %v", err)
		}
		if n > limit {
			return &reqError{codeTooLarge, fmt.Sprintf("archive has more than %d entries (at %q): send a larger tree as several archives", limit, hdr.Name)}
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
	}
}

// entryKinds names the kinds of entry extract refuses, for the client.
var entryKinds = map[byte]string{
	tar.TypeChar:  "a character device",
	tar.TypeBlock: "a block device",
	tar.TypeFifo:  "a FIFO",
	tar.TypeCont:  "a contiguous file",
}

// checkKind refuses an entry that is not a file, a directory or a link:
// nothing in an archive makes a device node or a FIFO in the sandbox, and
// dropping one silently would report success for a tree that is not
// there.
func checkKind(hdr *tar.Header) error {
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse, tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
		return nil
	}
	kind, ok := entryKinds[hdr.Typeflag]
	if !ok {
		kind = fmt.Sprintf("of type %q", hdr.Typeflag)
	}
	return invalidf("archive entry %q is %s: only files, directories, symlinks and hard links are extracted", hdr.Name, kind)
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // pax defaults for the entries after it (git archive writes one): the reader applies them
	}
	if err := checkKind(hdr); err != nil {
		return err
	}
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "" {
		return nil // the destination itself
	}
	if hdr.Size > maxEntrySize {
		return invalidf("archive entry %q is larger than %d bytes", hdr.Name, int64(maxEntrySize))
	}
	if err := x.parents(name, true); err != nil {
		return err
	}
	target := filepath.Join(x.dest, filepath.FromSlash(name))
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.dir(target, hdr)
	case tar.TypeSymlink:
		return x.symlink(target, hdr)
	case tar.TypeLink:
		return x.hardlink(target, hdr)
	}
	// A file; a GNU sparse one reads as its whole contents.
	return x.file(target, hdr, r)
}

// entryName checks an entry's name and returns it clean and relative to
// dest; "" is dest itself.
func entryName(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", invalidf("archive entry %q contains a NUL byte", name)
	}
	if strings.HasPrefix(name, "/") {
		return "", invalidf("archive entry %q has an absolute name", name)
	}
	var parts []string
	for _, part := range strings.Split(name, "/") {
		switch part {
		case "", ".":
		case "..":
			return "", invalidf("archive entry %q contains \"..\"", name)
		default:
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, "/"), nil
}

// parents checks that every parent of name inside dest is a real
// directory, not a symlink; with create, missing ones are made.
func (x *extractor) parents(name string, create bool) error {
	parts := strings.Split(name, "/")
	dir := x.dest
	for _, part := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, part)
		fi, err := os.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist) && create:
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			if err := os.Lchown(dir, x.uid, x.gid); err != nil {
				return err
			}
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return invalidf("archive entry %q passes through the symlink %s", name, dir)
		case !fi.IsDir():
			return invalidf("archive entry %q passes through %s, which is not a directory", name, dir)
		}
	}
	return nil
}

// vacate removes what is at target, unless it is a directory. It reports
// whether target is now free.
func vacate(target string) (free bool, err error) {
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	case err != nil:
		return false, err
	case fi.IsDir():
		return false, nil
	}
	return true, os.Remove(target)
}

func (x *extractor) dir(target string, hdr *tar.Header) error {
	free, err := vacate(target)
	if err != nil {
		return err
	}
	if free {
		if err := os.Mkdir(target, 0o700); err != nil {
			return err
		}
	} else if !x.root && !ownedBy(target, x.uid) {
		// Another's directory, in which the kernel decides what this
		// user may make.
		return nil
	}
	if err := os.Lchown(target, x.uid, x.gid); err != nil {
		return err
	}
	return os.Chmod(target, fs.FileMode(hdr.Mode&0o777))
}

func (x *extractor) file(target string, hdr *tar.Header, r io.Reader) error {
	free, err := vacate(target)
	if err != nil {
		return err
	}
	if !free {
		return invalidf("archive entry %q would replace the directory %s", hdr.Name, target)
	}
	// O_EXCL: if anything appeared at target meanwhile, even a symlink,
	// fail rather than write through it.
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.CopyN(f, r, hdr.Size)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalidf("archive is truncated in entry %q", hdr.Name)
	}
	if err != nil {
		return err
	}
	if err := f.Chown(x.uid, x.gid); err != nil {
		return err
	}
	if err := f.Chmod(fs.FileMode(hdr.Mode & 0o777)); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	x.res.Files++
	x.res.Bytes += n
	return setMtime(target, hdr.ModTime)
}

func (x *extractor) symlink(target string, hdr *tar.Header) error {
	if strings.IndexByte(hdr.Linkname, 0) >= 0 || hdr.Linkname == "" {
		return invalidf("archive entry %q has a bad link target", hdr.Name)
	}
	free, err := vacate(target)
	if err != nil {
		return err
	}
	if !free {
		return invalidf("archive entry %q would replace the directory %s", hdr.Name, target)
	}
	// The target may point anywhere (a venv's python does); what matters is
	// that no later entry is written through the link, which parents checks.
	if err := os.Symlink(hdr.Linkname, target); err != nil {
		return err
	}
	if err := os.Lchown(target, x.uid, x.gid); err != nil {
		return err
	}
	x.res.Files++
	return setMtime(target, hdr.ModTime)
}

func (x *extractor) hardlink(target string, hdr *tar.Header) error {
	src, err := entryName(hdr.Linkname)
	if err != nil {
		return err
	}
	if src == "" {
		return invalidf("archive entry %q links to the destination itself", hdr.Name)
	}
	if err := x.parents(src, false); err != nil {
		return err
	}
	srcPath := filepath.Join(x.dest, filepath.FromSlash(src))
	fi, err := os.Lstat(srcPath)
	if err != nil || !fi.Mode().IsRegular() {
		return invalidf("archive entry %q must link to a regular file inside the archive, not %q", hdr.Name, hdr.Linkname)
	}
	free, err := vacate(target)
	if err != nil {
		return err
	}
	if !free {
		return invalidf("archive entry %q would replace the directory %s", hdr.Name, target)
	}
	if err := os.Link(srcPath, target); err != nil {
		return err
	}
	x.res.Files++
	return nil
}

// ownedBy reports whether path, not followed, belongs to uid.
func ownedBy(path string, uid int) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// setMtime sets path's times to t without following a symlink.
func setMtime(path string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	ts := unix.NsecToTimespec(t.UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
