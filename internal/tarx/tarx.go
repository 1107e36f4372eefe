// Package tarx extracts a tar stream under an os.Root: the one extractor
// behind the client's downloads and the sandbox agent's uploads. The
// archive is untrusted either way: its names, kinds, sizes and links.
//
// Every name is checked before anything of its entry is written (Name),
// every parent inside the root must be a real directory and never a
// symbolic link, devices and FIFOs are refused, and the stream stops at
// bounds on its entries and bytes. What the os.Root guards on top is
// that no operation leaves the root, whatever a racing process does.
//
// Extraction runs on the calling goroutine and starts none: the agent
// calls it on a thread that holds the user's credentials.
//
// It imports only the standard library, so that the public client, which
// builds for macOS and Windows, may use it.
package tarx

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// The kinds of refusal, for errors.Is on an *Error.
var (
	// ErrUnsafe: a name that would leave the root or pass through a
	// symbolic link, a bad link, or an entry that is not a file, a
	// directory or a link.
	ErrUnsafe = errors.New("unsafe archive entry")
	// ErrTooLarge: the archive is past Options.MaxEntries or
	// Options.MaxBytes. Its message starts "more than".
	ErrTooLarge = errors.New("archive over its bound")
	// ErrDestination: what is already at an entry's name does not fit it
	// (a file onto a directory, a parent that is not a directory).
	ErrDestination = errors.New("destination refused")
	// ErrMalformed: the stream is not a whole tar archive, or an entry is
	// larger than Options.MaxEntrySize.
	ErrMalformed = errors.New("malformed archive")
)

// Error is a refusal of the archive. Its message says what in words; it
// unwraps to its Kind and, when one caused it, to the reading error.
type Error struct {
	Kind error
	Msg  string
	Err  error
}

func (e *Error) Error() string { return e.Msg }

func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

func refuse(kind error, format string, a ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, a...)}
}

// Options are the bounds and the policy of one extraction.
type Options struct {
	// MaxEntries bounds the entries, every header counted (directories,
	// pax global headers and the root itself too); 0 is no bound.
	MaxEntries int
	// MaxBytes bounds the regular files' bytes all together, as their
	// headers announce them; 0 is no bound.
	MaxBytes int64
	// MaxEntrySize bounds one entry's size; 0 is no bound.
	MaxEntrySize int64
	// Owner, when set, makes the extraction an upload into a tree its
	// owner already uses (see Owner); without it, an extraction is a
	// download onto the user's own disk: a directory entry leaves a
	// directory already there as it is, a file entry is written into an
	// existing file in place, a file or directory entry onto a symbolic
	// link is ErrUnsafe and onto a thing of the other kind ErrDestination,
	// and directories are made with the umask.
	Owner *Owner
}

// Owner is the policy of an upload: an entry replaces a file or symbolic
// link at its name (never a directory), and what is made belongs to UID:GID
// with the entry's permission bits exactly.
type Owner struct {
	UID, GID int
	// TakesOver says whether a directory already at an entry's name is
	// given to UID:GID and the entry's mode; nil is always.
	TakesOver func(fs.FileInfo) bool
	// LinkTimes, when set, gives a symbolic link made the entry's time
	// without following it (os.Root has no call for that).
	LinkTimes func(root *os.Root, name string, t time.Time) error
}

// Stats counts what an extraction read and made.
type Stats struct {
	Entries  int   // headers read
	Declared int64 // regular files' bytes, as their headers announce them
	Files    int   // files and links made
	Bytes    int64 // file bytes written
}

// Reader reads an archive entry by entry, counting each against the
// bounds and checking its name and kind before anything of it is written.
type Reader struct {
	tr   *tar.Reader
	opts Options
	Stats
}

// NewReader reads the archive r with the bounds and policy opts.
func NewReader(r io.Reader, opts Options) *Reader {
	return &Reader{tr: tar.NewReader(r), opts: opts}
}

// Next returns the next entry and its checked name ("" for the root
// itself, and for a pax global header, which is no entry to make), or
// io.EOF at the archive's end. Its kind is checked when it is extracted,
// before anything of it is written, so that a download decides what its
// destination is from the first entry whatever its kind.
func (x *Reader) Next() (*tar.Header, string, error) {
	hdr, err := x.tr.Next()
	if err == io.EOF {
		return nil, "", io.EOF
	}
	if errors.Is(err, tar.ErrInsecurePath) {
		return nil, "", refuse(ErrUnsafe, "archive entry %q has an unsafe name", hdr.Name)
	}
	if err != nil {
		return nil, "", &Error{Kind: ErrMalformed, Msg: "reading archive: " + err.Error(), Err: err}
	}
	x.Entries++
	if x.opts.MaxEntries > 0 && x.Entries > x.opts.MaxEntries {
		return nil, "", refuse(ErrTooLarge, "more than %d entries (at %q)", x.opts.MaxEntries, hdr.Name)
	}
	if x.opts.MaxEntrySize > 0 && hdr.Size > x.opts.MaxEntrySize {
		return nil, "", refuse(ErrMalformed, "archive entry %q is larger than %d bytes", hdr.Name, x.opts.MaxEntrySize)
	}
	if hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeGNUSparse {
		if x.opts.MaxBytes > 0 && (hdr.Size < 0 || hdr.Size > x.opts.MaxBytes-x.Declared) {
			return nil, "", refuse(ErrTooLarge, "more than %d bytes of files (at %q, %d bytes)", x.opts.MaxBytes, hdr.Name, hdr.Size)
		}
		x.Declared += hdr.Size
	}
	name, err := Name(hdr.Name)
	if err != nil {
		return nil, "", err
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		name = "" // pax defaults for the entries after it (git archive writes one): the reader applies them
	}
	return hdr, name, nil
}

// Read reads the current entry's data (a file's contents, never more
// than its header's size), for an extractor that makes entries its own
// way (the template layers, which keep owners and whiteouts) yet keeps
// Next's checks and bounds.
func (x *Reader) Read(p []byte) (int, error) { return x.tr.Read(p) }

// entryKinds names the kinds of entry refused.
var entryKinds = map[byte]string{
	tar.TypeChar:  "a character device",
	tar.TypeBlock: "a block device",
	tar.TypeFifo:  "a FIFO",
	tar.TypeCont:  "a contiguous file",
}

// checkKind refuses an entry that is not a file, a directory or a link:
// nothing in an archive makes a device node or a FIFO, and dropping one
// silently would report success for a tree that is not there.
func checkKind(hdr *tar.Header) error {
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeXGlobalHeader:
		return nil
	}
	kind, ok := entryKinds[hdr.Typeflag]
	if !ok {
		kind = fmt.Sprintf("of type %q", hdr.Typeflag)
	}
	return refuse(ErrUnsafe, "archive entry %q is %s: only files, directories, symlinks and hard links are extracted", hdr.Name, kind)
}

// Name checks an archive name and returns it clean, relative and
// slash-separated, "" for the root itself. It refuses an empty name, a NUL
// byte, an absolute name, any ".." component, and (where the separator is
// not a slash) backslashes, colons and whatever filepath.IsLocal refuses.
func Name(raw string) (string, error) {
	if raw == "" {
		return "", refuse(ErrUnsafe, "archive entry has an empty name")
	}
	if strings.IndexByte(raw, 0) >= 0 {
		return "", refuse(ErrUnsafe, "archive entry %q contains a NUL byte", raw)
	}
	if strings.HasPrefix(raw, "/") {
		return "", refuse(ErrUnsafe, "archive entry %q has an absolute name", raw)
	}
	if os.PathSeparator != '/' && strings.ContainsAny(raw, `\:`) {
		return "", refuse(ErrUnsafe, "archive entry %q has a backslash or a colon", raw)
	}
	for _, part := range strings.Split(raw, "/") {
		if part == ".." {
			return "", refuse(ErrUnsafe, "archive entry %q contains \"..\"", raw)
		}
	}
	name := path.Clean(raw)
	if name == "." {
		return "", nil
	}
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", refuse(ErrUnsafe, "archive entry %q is not a local name", raw)
	}
	return name, nil
}

// Extract extracts the entries into root, starting with hdr (named name)
// when it is not nil, to the archive's end or the first entry refused.
// The entries before a refused one stay; the refused one leaves nothing.
func (x *Reader) Extract(root *os.Root, hdr *tar.Header, name string) error {
	for {
		if hdr == nil {
			var err error
			hdr, name, err = x.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
		if name != "" { // "" is the root itself, or a pax global header
			if err := x.entry(root, hdr, name); err != nil {
				return err
			}
		}
		hdr = nil
	}
}

func (x *Reader) entry(root *os.Root, hdr *tar.Header, name string) error {
	if err := checkKind(hdr); err != nil {
		return err
	}
	if err := x.parents(root, name, true); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.dir(root, hdr, name)
	case tar.TypeSymlink:
		return x.symlink(root, hdr, name)
	case tar.TypeLink:
		return x.hardlink(root, hdr, name)
	}
	// A file; a GNU sparse one reads as its whole contents.
	if x.opts.Owner != nil {
		if err := vacate(root, name); err != nil {
			return err
		}
		// O_EXCL: if anything appeared at the name meanwhile, even a
		// symbolic link, fail rather than write through it.
		return x.WriteFile(root, name, hdr, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	}
	fi, err := lstat(root, name)
	if err != nil {
		return err
	}
	if fi != nil && fi.Mode()&fs.ModeSymlink != 0 {
		return refuse(ErrUnsafe, "archive entry %q: %s is a symbolic link", hdr.Name, name)
	}
	if fi != nil && fi.IsDir() {
		return refuse(ErrDestination, "archive entry %q would replace the directory %s", hdr.Name, name)
	}
	return x.WriteFile(root, name, hdr, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
}

// lstat is root.Lstat with a missing name as nil and no error.
func lstat(root *os.Root, name string) (fs.FileInfo, error) {
	fi, err := root.Lstat(filepath.FromSlash(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return fi, err
}

// parents checks that every parent of name inside root is a real
// directory, not a symbolic link; with create, missing ones are made.
func (x *Reader) parents(root *os.Root, name string, create bool) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	cur := ""
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		local := filepath.FromSlash(cur)
		fi, err := lstat(root, cur)
		switch {
		case err != nil:
			return err
		case fi == nil && create:
			if err := root.Mkdir(local, 0o755); err != nil {
				return err
			}
			if o := x.opts.Owner; o != nil {
				if err := root.Lchown(local, o.UID, o.GID); err != nil {
					return err
				}
			}
		case fi == nil:
			return &fs.PathError{Op: "lstat", Path: cur, Err: fs.ErrNotExist}
		case fi.Mode()&fs.ModeSymlink != 0:
			return refuse(ErrUnsafe, "archive entry %q passes through the symbolic link %s", name, cur)
		case !fi.IsDir():
			return refuse(ErrDestination, "archive entry %q passes through %s, which is not a directory", name, cur)
		}
	}
	return nil
}

// vacate removes what is at name, unless it is a directory, which it
// refuses.
func vacate(root *os.Root, name string) error {
	fi, err := lstat(root, name)
	switch {
	case err != nil:
		return err
	case fi == nil:
		return nil
	case fi.IsDir():
		return refuse(ErrDestination, "archive entry %q would replace the directory there", name)
	}
	return root.Remove(filepath.FromSlash(name))
}

func (x *Reader) dir(root *os.Root, hdr *tar.Header, name string) error {
	local := filepath.FromSlash(name)
	fi, err := lstat(root, name)
	if err != nil {
		return err
	}
	o := x.opts.Owner
	if o == nil {
		switch {
		case fi == nil:
			return root.Mkdir(local, fs.FileMode(hdr.Mode).Perm()|0o700)
		case fi.Mode()&fs.ModeSymlink != 0:
			return refuse(ErrUnsafe, "archive entry %q: %s is a symbolic link", hdr.Name, name)
		case fi.IsDir():
			return nil
		}
		return refuse(ErrDestination, "archive entry %q: %s exists and is not a directory", hdr.Name, name)
	}
	switch {
	case fi == nil || !fi.IsDir():
		if fi != nil {
			if err := root.Remove(local); err != nil {
				return err
			}
		}
		if err := root.Mkdir(local, 0o700); err != nil {
			return err
		}
	case o.TakesOver != nil && !o.TakesOver(fi):
		// Another's directory, in which the kernel decides what this
		// owner may make.
		return nil
	}
	if err := root.Lchown(local, o.UID, o.GID); err != nil {
		return err
	}
	return root.Chmod(local, fs.FileMode(hdr.Mode&0o777))
}

// WriteFile writes the current entry's data to name (slash-separated) in
// root with the entry's permission bits and time; flag says how it is
// opened.
func (x *Reader) WriteFile(root *os.Root, name string, hdr *tar.Header, flag int) error {
	local := filepath.FromSlash(name)
	perm := fs.FileMode(hdr.Mode & 0o777)
	open := perm
	if x.opts.Owner != nil {
		open = 0o600 // no one else may open it before it is the owner's
	}
	f, err := root.OpenFile(local, flag, open)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, x.tr)
	if err != nil {
		f.Close()
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return &Error{Kind: ErrMalformed, Msg: fmt.Sprintf("archive is truncated in entry %q", hdr.Name), Err: err}
		}
		return fmt.Errorf("extracting %q: %w", hdr.Name, err)
	}
	if o := x.opts.Owner; o != nil {
		if err := f.Chown(o.UID, o.GID); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Chmod(perm); err != nil { // the umask cut it, or it existed
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	x.Files++
	x.Bytes += n
	if hdr.ModTime.IsZero() {
		return nil
	}
	return root.Chtimes(local, hdr.ModTime, hdr.ModTime)
}

func (x *Reader) symlink(root *os.Root, hdr *tar.Header, name string) error {
	if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
		return refuse(ErrUnsafe, "archive entry %q has a bad link target", hdr.Name)
	}
	if err := vacate(root, name); err != nil {
		return err
	}
	// The target may point anywhere (a venv's python does); what matters is
	// that no later entry is written through the link, which parents checks.
	local := filepath.FromSlash(name)
	if err := root.Symlink(filepath.FromSlash(hdr.Linkname), local); err != nil {
		return err
	}
	x.Files++
	o := x.opts.Owner
	if o == nil {
		return nil
	}
	if err := root.Lchown(local, o.UID, o.GID); err != nil {
		return err
	}
	if o.LinkTimes == nil || hdr.ModTime.IsZero() {
		return nil
	}
	return o.LinkTimes(root, name, hdr.ModTime)
}

func (x *Reader) hardlink(root *os.Root, hdr *tar.Header, name string) error {
	src, err := Name(hdr.Linkname)
	if err != nil {
		return err
	}
	if src == "" {
		return refuse(ErrUnsafe, "archive entry %q links to the destination itself", hdr.Name)
	}
	if err := x.parents(root, src, false); err != nil {
		return err
	}
	// An upload links only to a regular file; a download also to a
	// symbolic link it made (as the SDKs do).
	fi, err := lstat(root, src)
	ok := err == nil && fi != nil && (fi.Mode().IsRegular() || x.opts.Owner == nil && fi.Mode()&fs.ModeSymlink != 0)
	if !ok {
		return refuse(ErrUnsafe, "archive entry %q must link to a regular file inside the archive, not %q", hdr.Name, hdr.Linkname)
	}
	if err := vacate(root, name); err != nil {
		return err
	}
	if err := root.Link(filepath.FromSlash(src), filepath.FromSlash(name)); err != nil {
		return err
	}
	x.Files++
	return nil
}
