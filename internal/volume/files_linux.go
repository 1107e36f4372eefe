package volume

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/tarx"
)

// A volume's tree was written by a sandbox's root. Every name in it is
// resolved with openat2 inside the volume's root, refusing any symbolic
// link (RESOLVE_NO_SYMLINKS: none is followed, not even one that stays
// inside), magic link or other mount on the way; opens add O_NOFOLLOW and
// O_NONBLOCK (a FIFO never blocks) and every kind is checked on the
// descriptor (fstat) before it is used.

const resolve = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// Entry is one name in a directory listing.
type Entry struct {
	Name string `json:"name"`
	Type string `json:"type"` // "file", "dir", "symlink" or "other"
	Size int64  `json:"size"`
	// Mode is the permission bits (0o7777); UID and GID the owner as the
	// sandbox sees it; ModTime the last change of its contents.
	Mode    uint32    `json:"mode"`
	UID     uint32    `json:"uid"`
	GID     uint32    `json:"gid"`
	ModTime time.Time `json:"mtime"`
}

// maxListing bounds a listing's entries; maxTarEntries an archive's.
const (
	maxListing    = 100000
	maxTarEntries = 1000000
	maxDepth      = 256
)

// cleanPath checks a path inside a volume ("/a/b", "" and "/" the root)
// and returns it relative ("a/b", "." the root).
func cleanPath(p string) (string, error) {
	if p == "" || p == "/" {
		return ".", nil
	}
	if p[0] != '/' || path.Clean(p) != p || strings.ContainsRune(p, 0) || len(p) > 4096 {
		return "", sandbox.Errorf(sandbox.KindInvalid, "bad path %q: it must be absolute and clean", p)
	}
	return p[1:], nil
}

func openIn(root *os.File, rel string, flags uint64, mode uint32) (*os.File, error) {
	fd, err := unix.Openat2(int(root.Fd()), rel, &unix.OpenHow{
		Flags: flags | unix.O_CLOEXEC | unix.O_NOFOLLOW, Mode: uint64(mode), Resolve: resolve,
	})
	if err != nil {
		return nil, pathError(rel, err)
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// pathError is a failure to resolve or open a name in a volume as the
// client sees it.
func pathError(rel string, err error) error {
	p := "/" + strings.TrimPrefix(rel, ".")
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return sandbox.Errorf(sandbox.KindNotFound, "%s not found in the volume", p)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENXIO):
		return sandbox.Errorf(sandbox.KindInvalid, "%s is (or passes through) a symbolic link or a special file, which the files API does not follow", p)
	case errors.Is(err, unix.EISDIR):
		return sandbox.Errorf(sandbox.KindConflict, "%s is a directory", p)
	case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
		return sandbox.Errorf(sandbox.KindConflict, "%s: %v", p, err)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return sandbox.Errorf(sandbox.KindPayloadTooLarge, "the volume is full")
	}
	return fmt.Errorf("%s: %w", p, err)
}

// openRoot checks p and opens volume id's mounted root, returning p
// relative to it.
func (h *Host) openRoot(id, p string) (root *os.File, rel string, err error) {
	if rel, err = cleanPath(p); err != nil {
		return nil, "", err
	}
	if !ValidID(id) {
		return nil, "", fmt.Errorf("bad volume id %q", id)
	}
	root, err = os.OpenFile(h.Dir(id), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	return root, rel, err
}

// Opened is what Open found: a regular file (File, Size) or a directory's
// listing (Entries).
type Opened struct {
	File    *os.File
	Size    int64
	Entries []Entry
}

// Open opens p in volume id: a regular file to read (the caller closes
// File) or a directory, listed. Anything else is refused, and so is a file
// whose size passes limit (the volume's size: a sparse file may claim far
// more than the volume holds).
func (h *Host) Open(id, p string, limit int64) (*Opened, error) {
	root, rel, err := h.openRoot(id, p)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := openIn(root, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Size > limit {
			f.Close()
			return nil, sandbox.Errorf(sandbox.KindPayloadTooLarge, "%s claims %d bytes, more than the volume's size (a sparse file)", p, st.Size)
		}
		return &Opened{File: f, Size: st.Size}, nil
	case unix.S_IFDIR:
		defer f.Close()
		ents, err := list(f)
		return &Opened{Entries: ents}, err
	}
	f.Close()
	return nil, sandbox.Errorf(sandbox.KindInvalid, "%s is not a regular file or a directory", p)
}

// list lists the open directory d without following anything in it.
func list(d *os.File) ([]Entry, error) {
	names, err := d.Readdirnames(maxListing + 1)
	if err != nil && err != io.EOF {
		return nil, err
	}
	if len(names) > maxListing {
		return nil, sandbox.Errorf(sandbox.KindPayloadTooLarge, "the directory holds more than %d entries", maxListing)
	}
	out := make([]Entry, 0, len(names))
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(int(d.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		e := Entry{Name: n, Type: "other", Mode: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid, ModTime: time.Unix(st.Mtim.Unix()).UTC()}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Type, e.Size = "file", st.Size
		case unix.S_IFDIR:
			e.Type = "dir"
		case unix.S_IFLNK:
			e.Type = "symlink"
		}
		out = append(out, e)
	}
	return out, nil
}

// mkdirs makes the parents of rel inside root (real directories only) and
// returns the last one open. Each is made and opened by one name relative
// to its parent's descriptor: mkdirat of a longer path would resolve a
// link on the way (the sandbox's "up -> ../../..") and make a directory on
// the host.
func mkdirs(root *os.File, rel string) (*os.File, error) {
	cur, err := openIn(root, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	dir := path.Dir(rel)
	if dir == "." {
		return cur, nil
	}
	done := "."
	for _, part := range strings.Split(dir, "/") {
		done = path.Join(done, part)
		err := unix.Mkdirat(int(cur.Fd()), part, 0o755)
		made := err == nil
		if err != nil && !errors.Is(err, unix.EEXIST) {
			cur.Close()
			return nil, pathError(done, err)
		}
		next, err := openIn(cur, part, unix.O_PATH|unix.O_DIRECTORY, 0)
		cur.Close()
		if err != nil {
			return nil, err
		}
		if made {
			// Made by the host for the sandbox user.
			unix.Fchownat(int(next.Fd()), "", SandboxUID, SandboxUID, unix.AT_EMPTY_PATH)
		}
		cur = next
	}
	return cur, nil
}

// Write writes r (at most limit bytes) to p in volume id, making its
// parents; a file there is replaced in place. A symbolic link or special
// file at p or on the way is refused.
func (h *Host) Write(id, p string, r io.Reader, limit int64) (int64, error) {
	root, rel, err := h.openRoot(id, p)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	if rel == "." {
		return 0, sandbox.Errorf(sandbox.KindInvalid, "the volume's root is a directory")
	}
	dir, err := mkdirs(root, rel)
	if err != nil {
		return 0, err
	}
	dir.Close()
	f, err := openIn(root, rel, unix.O_WRONLY|unix.O_CREAT|unix.O_NONBLOCK|unix.O_NOCTTY, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, sandbox.Errorf(sandbox.KindInvalid, "%s is not a regular file", p)
	}
	if err := f.Truncate(0); err != nil {
		return 0, pathError(rel, err)
	}
	if st.Uid == 0 {
		f.Chown(SandboxUID, SandboxUID)
	}
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	if err != nil {
		return n, pathError(rel, err)
	}
	if n > limit {
		return n, sandbox.Errorf(sandbox.KindPayloadTooLarge, "the file is larger than %d bytes", limit)
	}
	return n, nil
}

// RemovePath removes p in volume id: a file, a link or an empty directory.
func (h *Host) RemovePath(id, p string) error {
	root, rel, err := h.openRoot(id, p)
	if err != nil {
		return err
	}
	defer root.Close()
	if rel == "." {
		return sandbox.Errorf(sandbox.KindInvalid, "the volume's root cannot be removed")
	}
	dir, err := openIn(root, path.Dir(rel), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	base := path.Base(rel)
	err = unix.Unlinkat(int(dir.Fd()), base, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		err = unix.Unlinkat(int(dir.Fd()), base, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return pathError(rel, err)
	}
	return nil
}

// TarOut writes p in volume id as a tar stream (a directory's contents,
// or one file under its name): directories, regular
// files and symbolic links (as links, never followed); devices, FIFOs and
// sockets are left out, and so are sparse files claiming more than limit
// (the volume's size). A file's other names go out as hard links. The
// files' bytes all together are bounded by limit: past it (sparse files
// again) the archive fails.
func (h *Host) TarOut(id, p string, w io.Writer, limit int64) error {
	root, rel, err := h.openRoot(id, p)
	if err != nil {
		return err
	}
	defer root.Close()
	top, err := openIn(root, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer top.Close()
	t := &tarOut{tw: tar.NewWriter(w), limit: limit, budget: limit}
	var st unix.Stat_t
	if err := unix.Fstat(int(top.Fd()), &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		// A directory's contents, named from it: what TarIn of the same
		// path takes back.
		err = t.dir(top, "", &st, 0)
	case unix.S_IFREG:
		err = t.file(top, path.Base(rel), &st)
	default:
		return sandbox.Errorf(sandbox.KindInvalid, "%s is not a regular file or a directory", p)
	}
	if err != nil {
		return err
	}
	return t.tw.Close()
}

type tarOut struct {
	tw      *tar.Writer
	limit   int64 // the volume's size
	budget  int64 // what is left of it for the files' bytes
	entries int
	// links names the first entry of each file with more than one name
	// (by device and inode): its other names go out as hard links.
	links map[[2]uint64]string
}

func header(name string, st *unix.Stat_t) *tar.Header {
	return &tar.Header{
		Name: name, Mode: int64(st.Mode & 0o7777), Uid: int(st.Uid), Gid: int(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()), Format: tar.FormatPAX,
	}
}

func (t *tarOut) count() error {
	t.entries++
	if t.entries > maxTarEntries {
		return sandbox.Errorf(sandbox.KindPayloadTooLarge, "the archive would hold more than %d entries", maxTarEntries)
	}
	return nil
}

func (t *tarOut) dir(d *os.File, name string, st *unix.Stat_t, depth int) error {
	if depth > maxDepth {
		return sandbox.Errorf(sandbox.KindPayloadTooLarge, "directories nested deeper than %d", maxDepth)
	}
	if name != "" {
		if err := t.count(); err != nil {
			return err
		}
		hdr := header(name+"/", st)
		hdr.Typeflag = tar.TypeDir
		if err := t.tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	names, err := d.Readdirnames(maxListing + 1)
	if err != nil && err != io.EOF {
		return err
	}
	if len(names) > maxListing {
		return sandbox.Errorf(sandbox.KindPayloadTooLarge, "a directory holds more than %d entries", maxListing)
	}
	for _, n := range names {
		child := path.Join(name, n)
		var cst unix.Stat_t
		if err := unix.Fstatat(int(d.Fd()), n, &cst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		switch cst.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := readlinkat(d, n)
			if err != nil {
				continue
			}
			if err := t.count(); err != nil {
				return err
			}
			hdr := header(child, &cst)
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
			if err := t.tw.WriteHeader(hdr); err != nil {
				return err
			}
		case unix.S_IFREG, unix.S_IFDIR:
			if cst.Mode&unix.S_IFMT == unix.S_IFREG && cst.Size > t.limit {
				continue // sparse, claiming more than the volume holds: left out
			}
			flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
			fd, err := unix.Openat(int(d.Fd()), n, flags, 0)
			if err != nil {
				continue // replaced meanwhile (by a FIFO, a link): left out
			}
			f := os.NewFile(uintptr(fd), child)
			err = t.child(f, child, depth)
			f.Close()
			if err != nil {
				return err
			}
		}
		// Devices, FIFOs and sockets are left out.
	}
	return nil
}

// child writes an entry opened by name, checking its kind on the
// descriptor: it may have been swapped since the directory was read.
func (t *tarOut) child(f *os.File, name string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return t.dir(f, name, &st, depth+1)
	case unix.S_IFREG:
		return t.file(f, name, &st)
	}
	return nil
}

func (t *tarOut) file(f *os.File, name string, st *unix.Stat_t) error {
	if err := t.count(); err != nil {
		return err
	}
	if st.Nlink > 1 {
		key := [2]uint64{uint64(st.Dev), st.Ino}
		if first, ok := t.links[key]; ok {
			hdr := header(name, st)
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			return t.tw.WriteHeader(hdr)
		}
		if t.links == nil {
			t.links = map[[2]uint64]string{}
		}
		t.links[key] = name
	}
	if st.Size > t.budget {
		return sandbox.Errorf(sandbox.KindPayloadTooLarge, "the archive would be larger than the volume's size")
	}
	t.budget -= st.Size
	hdr := header(name, st)
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	if err := t.tw.WriteHeader(hdr); err != nil {
		return err
	}
	// The sandbox may change the file meanwhile: exactly Size bytes go out,
	// zeros for what it cut.
	n, err := io.Copy(t.tw, io.LimitReader(f, st.Size))
	if err != nil {
		return err
	}
	if n < st.Size {
		_, err = io.Copy(t.tw, io.LimitReader(zeros{}, st.Size-n))
	}
	return err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func readlinkat(d *os.File, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(int(d.Fd()), name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// TarIn extracts the tar stream r into directory p of volume id (made when
// missing) with the project's checked extraction (internal/tarx): names
// stay inside, parents are real directories, devices and FIFOs are
// refused; limit bounds the files' bytes.
func (h *Host) TarIn(id, p string, r io.Reader, limit int64) error {
	root, rel, err := h.openRoot(id, p)
	if err != nil {
		return err
	}
	defer root.Close()
	if rel != "." {
		d, err := mkdirs(root, rel+"/x")
		if err != nil {
			return err
		}
		d.Close()
	}
	dir, err := openIn(root, rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	// The directory as it was resolved (no link followed), not a path that
	// could be swapped under it.
	vr, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(int(dir.Fd())))
	if err != nil {
		return err
	}
	defer vr.Close()
	x := tarx.NewReader(r, tarx.Options{
		MaxEntries: maxTarEntries, MaxBytes: limit, MaxEntrySize: limit,
		Owner: &tarx.Owner{UID: SandboxUID, GID: SandboxUID},
	})
	if err := x.Extract(vr, nil, ""); err != nil {
		var te *tarx.Error
		if errors.As(err, &te) {
			return sandbox.Errorf(sandbox.KindInvalid, "%s", te.Msg)
		}
		if errors.Is(err, unix.ENOSPC) {
			return sandbox.Errorf(sandbox.KindPayloadTooLarge, "the volume is full")
		}
		return err
	}
	return nil
}
