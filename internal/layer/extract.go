package layer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/tarx"
)

// The names of the overlayfs and OCI conventions an extraction converts.
const (
	opaqueXattr = "trusted.overlay.opaque"
	paxXattr    = "SCHILY.xattr."
	whPrefix    = ".wh."
	whMeta      = ".wh..wh." // aufs's own bookkeeping (.wh..wh.plnk, .wh..wh.aufs)
	whOpaque    = ".wh..wh..opq"
)

func refuse(kind error, format string, a ...any) error {
	return &tarx.Error{Kind: kind, Msg: fmt.Sprintf(format, a...)}
}

// extractor makes one layer's entries under root. It is the only writer
// of that tree (a fresh directory beneath the store's 0700 root), so what
// it has checked stays true: a directory it knows is never replaced by
// anything else (a non-directory onto a directory is refused).
type extractor struct {
	ctx    context.Context
	root   *os.Root
	x      *tarx.Reader
	format Format
	lim    Limits

	written int64           // regular files' bytes written
	implied int             // directories made for names with no entry of their own
	dirs    map[string]bool // names known to be real directories ("" is the root)
	times   []dirTime       // directories' times, set last (their children change them)

	parentName string   // the directory parentFD is open on
	parentFD   *os.File // the last parent directory used, kept open
	buf        []byte
}

type dirTime struct {
	name         string
	atime, mtime time.Time
}

func newExtractor(ctx context.Context, root *os.Root, r io.Reader, f Format, lim Limits) *extractor {
	return &extractor{
		ctx:    ctx,
		root:   root,
		x:      tarx.NewReader(r, tarx.Options{MaxEntries: lim.MaxEntries, MaxBytes: lim.MaxBytes, MaxEntrySize: lim.MaxEntrySize}),
		format: f,
		lim:    lim,
		dirs:   map[string]bool{"": true},
		buf:    make([]byte, 256<<10),
	}
}

func (e *extractor) close() {
	if e.parentFD != nil {
		e.parentFD.Close()
		e.parentFD = nil
	}
}

// run extracts every entry, then gives the directories their times.
func (e *extractor) run() error {
	defer e.close()
	for {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		hdr, name, err := e.x.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // pax defaults for the entries after it: the reader applies them
		}
		if err := e.entry(hdr, name); err != nil {
			return hostLimit(hdr, err)
		}
	}
	// Deepest last made first does not matter: a directory's time is set
	// after all its children exist, and setting one never changes another's.
	for _, d := range e.times {
		if err := e.root.Chtimes(local(d.name), d.atime, d.mtime); err != nil {
			return err
		}
	}
	return nil
}

// hostLimit turns the file system's refusals of what the archive asks
// (a name or link target too long, too many links to one file) into the
// archive's fault; other host errors (a full disk) stay the host's.
func hostLimit(hdr *tar.Header, err error) error {
	var te *tarx.Error
	if errors.As(err, &te) {
		return err
	}
	switch {
	case errors.Is(err, unix.ENAMETOOLONG):
		return &tarx.Error{Kind: tarx.ErrMalformed, Msg: fmt.Sprintf("archive entry %q: a name or link target too long", hdr.Name), Err: err}
	case errors.Is(err, unix.EMLINK):
		return &tarx.Error{Kind: tarx.ErrMalformed, Msg: fmt.Sprintf("archive entry %q: too many links", hdr.Name), Err: err}
	}
	return err
}

func local(name string) string {
	if name == "" {
		return "."
	}
	return filepath.FromSlash(name)
}

func (e *extractor) entry(hdr *tar.Header, name string) error {
	if hdr.Uid < 0 || hdr.Gid < 0 || int64(hdr.Uid) >= math.MaxUint32 || int64(hdr.Gid) >= math.MaxUint32 {
		return refuse(tarx.ErrMalformed, "archive entry %q has the owner %d:%d", hdr.Name, hdr.Uid, hdr.Gid)
	}
	if e.format == OCI {
		done, err := e.ociWhiteout(hdr, name)
		if done || err != nil {
			return err
		}
	}
	if name == "" {
		if hdr.Typeflag != tar.TypeDir {
			return refuse(tarx.ErrUnsafe, "archive entry %q names the layer's root and is not a directory", hdr.Name)
		}
		return e.dir(hdr, name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return e.dir(hdr, name)
	case tar.TypeReg, tar.TypeGNUSparse: // a sparse file reads as its whole contents
		return e.file(hdr, name)
	case tar.TypeSymlink:
		return e.symlink(hdr, name)
	case tar.TypeLink:
		return e.hardlink(hdr, name)
	case tar.TypeFifo:
		// A FIFO is nothing a template needs (a program makes its own),
		// and the runsc upper layer may hold one a sandbox left.
		return nil
	case tar.TypeChar:
		if e.format == Overlay && hdr.Devmajor == 0 && hdr.Devminor == 0 {
			return e.whiteout(hdr, name, true)
		}
		return refuse(tarx.ErrUnsafe, "archive entry %q is a character device %d:%d: a template holds no device nodes", hdr.Name, hdr.Devmajor, hdr.Devminor)
	case tar.TypeBlock:
		return refuse(tarx.ErrUnsafe, "archive entry %q is a block device: a template holds no device nodes", hdr.Name)
	}
	return refuse(tarx.ErrUnsafe, "archive entry %q is of type %q: only files, directories, links and whiteouts make a layer", hdr.Name, hdr.Typeflag)
}

// ociWhiteout converts an OCI whiteout (.wh.NAME, .wh..wh..opq) into
// overlayfs's form; done says the entry was one (or aufs bookkeeping,
// which is skipped).
func (e *extractor) ociWhiteout(hdr *tar.Header, name string) (done bool, err error) {
	if name == "" {
		return false, nil
	}
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	for _, part := range strings.Split(dir, "/") {
		switch {
		case strings.HasPrefix(part, whMeta):
			return true, nil // inside aufs's hard-link store: not the image's files
		case strings.HasPrefix(part, whPrefix):
			return true, refuse(tarx.ErrUnsafe, "archive entry %q is inside a whiteout", hdr.Name)
		}
	}
	switch {
	case base == whOpaque:
		return true, e.opaque(hdr, dir)
	case strings.HasPrefix(base, whMeta):
		return true, nil
	case !strings.HasPrefix(base, whPrefix):
		return false, nil
	}
	target := base[len(whPrefix):]
	if target == "" || target == "." || target == ".." {
		return true, refuse(tarx.ErrUnsafe, "archive entry %q is a whiteout of no name in its directory", hdr.Name)
	}
	return true, e.whiteout(hdr, path.Join(dir, target), false)
}

// parent returns an open descriptor of name's parent directory (made when
// missing, each component checked to be a real directory, never a
// symbolic link) and name's last component. The descriptor stays the
// extractor's.
func (e *extractor) parent(name string, create bool) (*os.File, string, error) {
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if err := e.mkdirs(dir, create, name); err != nil {
		return nil, "", err
	}
	if e.parentFD == nil || e.parentName != dir {
		e.close()
		f, err := e.root.Open(local(dir))
		if err != nil {
			return nil, "", err
		}
		e.parentFD, e.parentName = f, dir
	}
	return e.parentFD, base, nil
}

// mkdirs checks that dir and its parents are real directories, making the
// missing ones (root-owned, 0755: an image's layer often names a file
// before, or without, its directories) when create.
func (e *extractor) mkdirs(dir string, create bool, entry string) error {
	if e.dirs[dir] {
		return nil
	}
	cur := ""
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		if e.dirs[cur] {
			continue
		}
		fi, err := e.root.Lstat(local(cur))
		switch {
		case errors.Is(err, fs.ErrNotExist) && create:
			// A directory made for a name costs an inode and a block as an
			// entry does: one name of a thousand components must not make
			// a thousand directories past the bound on entries.
			e.implied++
			if max := e.lim.MaxEntries; max > 0 && e.x.Entries+e.implied > max {
				return refuse(tarx.ErrTooLarge, "more than %d entries, with the directories %q needs", max, entry)
			}
			if err := e.root.Mkdir(local(cur), 0o755); err != nil {
				return err
			}
			if err := e.root.Chmod(local(cur), 0o755); err != nil { // the umask cut it
				return err
			}
		case errors.Is(err, fs.ErrNotExist):
			return refuse(tarx.ErrUnsafe, "archive entry %q refers to %s, which is not earlier in the layer", entry, cur)
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return refuse(tarx.ErrUnsafe, "archive entry %q passes through the symbolic link %s", entry, cur)
		case create && fi.Mode()&fs.ModeCharDevice != 0 && isWhiteoutInfo(fi):
			// A name beneath a whiteout of this layer: a directory made
			// anew where a lower one was removed, so opaque, as a
			// directory entry onto the whiteout would be.
			if err := e.replaceWhiteout(cur, entry); err != nil {
				return err
			}
		case !fi.IsDir():
			return refuse(tarx.ErrDestination, "archive entry %q passes through %s, which is not a directory", entry, cur)
		}
		e.dirs[cur] = true
	}
	return nil
}

func isWhiteoutInfo(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// replaceWhiteout makes the whiteout at name an opaque directory, root's
// and 0755, counted as a directory made for entry.
func (e *extractor) replaceWhiteout(name, entry string) error {
	e.implied++
	if max := e.lim.MaxEntries; max > 0 && e.x.Entries+e.implied > max {
		return refuse(tarx.ErrTooLarge, "more than %d entries, with the directories %q needs", max, entry)
	}
	if err := e.root.Remove(local(name)); err != nil {
		return err
	}
	if err := e.root.Mkdir(local(name), 0o755); err != nil {
		return err
	}
	d, err := e.openDir(name)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Fchmod(int(d.Fd()), 0o755); err != nil {
		return err
	}
	return unix.Fsetxattr(int(d.Fd()), opaqueXattr, []byte("y"), 0)
}

// lstat is fstatat without following, nil when nothing is there.
func lstat(dir *os.File, base string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(dir.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

func isWhiteout(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 }

// vacate makes room for a non-directory entry at base: a duplicate entry
// replaces what an earlier one made (the last wins, as tar has it), except
// a directory, which no later non-directory replaces.
func vacate(dir *os.File, base string, hdr *tar.Header) error {
	st, err := lstat(dir, base)
	switch {
	case err != nil:
		return err
	case st == nil:
		return nil
	case isDir(st):
		return refuse(tarx.ErrDestination, "archive entry %q would replace a directory made earlier in the layer", hdr.Name)
	}
	return unix.Unlinkat(int(dir.Fd()), base, 0)
}

// finish gives what is at base (not followed) the entry's owner and times.
func finish(dir *os.File, base string, hdr *tar.Header) error {
	if err := unix.Fchownat(int(dir.Fd()), base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return setTimes(dir, base, hdr)
}

func setTimes(dir *os.File, base string, hdr *tar.Header) error {
	if hdr.ModTime.IsZero() {
		return nil
	}
	ts := []unix.Timespec{timespec(hdr.AccessTime, hdr.ModTime), timespec(hdr.ModTime, hdr.ModTime)}
	return unix.UtimesNanoAt(int(dir.Fd()), base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func timespec(t, fallback time.Time) unix.Timespec {
	if t.IsZero() {
		t = fallback
	}
	return unix.NsecToTimespec(t.UnixNano())
}

// perm is the entry's permission bits with setuid, setgid and sticky, as
// the archive has them: the tree is reachable only through the store's
// 0700 directories and is mounted nosuid, so they gain nothing on the host.
func perm(hdr *tar.Header) uint32 { return uint32(hdr.Mode) & 0o7777 }

func (e *extractor) file(hdr *tar.Header, name string) error {
	dir, base, err := e.parent(name, true)
	if err != nil {
		return err
	}
	if err := vacate(dir, base, hdr); err != nil {
		return err
	}
	fd, err := unix.Openat(int(dir.Fd()), base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("extracting %q: %w", hdr.Name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := e.copy(f, hdr); err != nil {
		f.Close()
		return err
	}
	// The owner first: chown clears setuid and setgid, which the mode
	// then sets as the archive has them.
	if err := f.Chown(hdr.Uid, hdr.Gid); err != nil {
		f.Close()
		return err
	}
	if err := unix.Fchmod(int(f.Fd()), perm(hdr)); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return setTimes(dir, base, hdr)
}

// copy writes the entry's data to f, counting the bytes written against
// MaxBytes whatever the headers said.
func (e *extractor) copy(f *os.File, hdr *tar.Header) error {
	for {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		n, rerr := e.x.Read(e.buf)
		if n > 0 {
			if e.lim.MaxBytes > 0 && e.written+int64(n) > e.lim.MaxBytes {
				return refuse(tarx.ErrTooLarge, "more than %d bytes of files (at %q)", e.lim.MaxBytes, hdr.Name)
			}
			if _, err := f.Write(e.buf[:n]); err != nil {
				return fmt.Errorf("extracting %q: %w", hdr.Name, err)
			}
			e.written += int64(n)
		}
		switch {
		case rerr == io.EOF:
			return nil
		case errors.Is(rerr, io.ErrUnexpectedEOF):
			return &tarx.Error{Kind: tarx.ErrMalformed, Msg: fmt.Sprintf("archive is truncated in entry %q", hdr.Name), Err: rerr}
		case rerr != nil:
			if e.ctx.Err() != nil {
				return e.ctx.Err()
			}
			return &tarx.Error{Kind: tarx.ErrMalformed, Msg: fmt.Sprintf("reading archive entry %q: %v", hdr.Name, rerr), Err: rerr}
		}
	}
}

func (e *extractor) dir(hdr *tar.Header, name string) error {
	opaque := false
	if name != "" {
		dir, base, err := e.parent(name, true)
		if err != nil {
			return err
		}
		st, err := lstat(dir, base)
		if err != nil {
			return err
		}
		if st != nil && !isDir(st) {
			// The last entry wins; a directory onto a whiteout of the same
			// name is a directory that replaced a lower one: opaque.
			opaque = isWhiteout(st)
			if err := unix.Unlinkat(int(dir.Fd()), base, 0); err != nil {
				return err
			}
			st = nil
		}
		if st == nil {
			if err := unix.Mkdirat(int(dir.Fd()), base, 0o700); err != nil {
				return err
			}
		}
		e.dirs[name] = true
	}
	if e.format == Overlay && hdr.PAXRecords[paxXattr+opaqueXattr] == "y" {
		opaque = true
	}
	d, err := e.openDir(name)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Chown(hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if err := unix.Fchmod(int(d.Fd()), perm(hdr)); err != nil {
		return err
	}
	if opaque {
		if err := unix.Fsetxattr(int(d.Fd()), opaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("marking %q opaque: %w", hdr.Name, err)
		}
	}
	if !hdr.ModTime.IsZero() {
		e.times = append(e.times, dirTime{name: name, atime: orTime(hdr.AccessTime, hdr.ModTime), mtime: hdr.ModTime})
	}
	return nil
}

func orTime(t, fallback time.Time) time.Time {
	if t.IsZero() {
		return fallback
	}
	return t
}

// openDir opens the directory name (known to be one) without following a
// link at its last component.
func (e *extractor) openDir(name string) (*os.File, error) {
	f, err := e.root.OpenFile(local(name), os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// opaque marks the directory dir (made when missing) opaque: an OCI
// .wh..wh..opq entry.
func (e *extractor) opaque(hdr *tar.Header, dir string) error {
	if dir != "" {
		if _, _, err := e.parent(dir, true); err != nil {
			return err
		}
		if err := e.mkdirs(dir, true, hdr.Name); err != nil {
			return err
		}
	}
	d, err := e.openDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Fsetxattr(int(d.Fd()), opaqueXattr, []byte("y"), 0); err != nil {
		return fmt.Errorf("marking %q opaque: %w", dir, err)
	}
	return nil
}

// whiteout makes overlayfs's whiteout, a character device 0:0, at name.
// In the Overlay format the entry is one and replaces what is there; an
// OCI whiteout hides only what lower layers have, so one named like an
// entry of its own layer leaves that entry as it is.
func (e *extractor) whiteout(hdr *tar.Header, name string, replace bool) error {
	dir, base, err := e.parent(name, true)
	if err != nil {
		return err
	}
	st, err := lstat(dir, base)
	if err != nil {
		return err
	}
	if st != nil {
		if !replace {
			return nil
		}
		if err := vacate(dir, base, hdr); err != nil {
			return err
		}
	}
	if err := unix.Mknodat(int(dir.Fd()), base, unix.S_IFCHR|0o600, 0); err != nil {
		return fmt.Errorf("making the whiteout %q: %w", hdr.Name, err)
	}
	return finish(dir, base, hdr)
}

func (e *extractor) symlink(hdr *tar.Header, name string) error {
	if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
		return refuse(tarx.ErrUnsafe, "archive entry %q has a bad link target", hdr.Name)
	}
	dir, base, err := e.parent(name, true)
	if err != nil {
		return err
	}
	if err := vacate(dir, base, hdr); err != nil {
		return err
	}
	// The target may point anywhere (it is resolved inside the sandbox,
	// never on the host): what matters is that no later entry is written
	// through the link, which parent checks.
	if err := unix.Symlinkat(hdr.Linkname, int(dir.Fd()), base); err != nil {
		return fmt.Errorf("extracting %q: %w", hdr.Name, err)
	}
	return finish(dir, base, hdr)
}

// hardlink links name to an entry earlier in the same layer: a regular
// file or a symbolic link, never a directory, a whiteout or anything
// outside the layer.
func (e *extractor) hardlink(hdr *tar.Header, name string) error {
	src, err := tarx.Name(hdr.Linkname)
	if err != nil {
		return err
	}
	if src == "" || src == name {
		return refuse(tarx.ErrUnsafe, "archive entry %q links to %q", hdr.Name, hdr.Linkname)
	}
	sdir, sbase := path.Split(src)
	sdir = strings.TrimSuffix(sdir, "/")
	if err := e.mkdirs(sdir, false, hdr.Name); err != nil {
		return err
	}
	sd, err := e.root.OpenFile(local(sdir), os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer sd.Close()
	st, err := lstat(sd, sbase)
	if err != nil {
		return err
	}
	if st == nil || (st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFLNK) {
		return refuse(tarx.ErrUnsafe, "archive entry %q must link to a file earlier in the layer, not %q", hdr.Name, hdr.Linkname)
	}
	dir, base, err := e.parent(name, true)
	if err != nil {
		return err
	}
	if err := vacate(dir, base, hdr); err != nil {
		return err
	}
	if err := unix.Linkat(int(sd.Fd()), sbase, int(dir.Fd()), base, 0); err != nil {
		return fmt.Errorf("extracting %q: %w", hdr.Name, err)
	}
	return nil
}
