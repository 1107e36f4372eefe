package client

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// A download's archive comes from the sandbox: its names, kinds, sizes and
// length are untrusted. Extraction goes through an os.Root, refuses every
// name that would leave it or pass through a symbolic link, and stops at
// bounds on the entries, the file bytes and the archive's own bytes.

const (
	// DefaultDownloadMaxBytes bounds the bytes of the regular files one
	// download writes: 10 GiB.
	DefaultDownloadMaxBytes int64 = 10 << 30
	// DefaultDownloadMaxEntries bounds the entries (files, directories,
	// links) of one download's archive.
	DefaultDownloadMaxEntries = 1_000_000
	// headerAllowance is the archive bytes each entry may take beyond its
	// file's data (its headers, PAX records and padding): the archive as a
	// whole is bounded by MaxBytes plus this much per entry allowed, so a
	// stream of headers without entries ends too.
	headerAllowance = 4 << 10
)

// ErrArchiveTooLarge is returned by a download whose archive is past one
// of its bounds (DownloadMaxBytes, DownloadMaxEntries). What was written
// before the bound was reached stays.
var ErrArchiveTooLarge = errors.New("archive over the download's bound")

// ErrDestination is returned by Download when the archive does not fit
// the destination: a directory onto a file, a file onto a directory of
// the source's name, a file onto "DIR/" that is not a directory.
var ErrDestination = errors.New("destination refused")

// DownloadOption sets a bound of Download and DownloadDir.
type DownloadOption func(*downloadOptions)

// DownloadMaxBytes bounds the bytes of the regular files a download
// writes (DefaultDownloadMaxBytes when not given or not positive).
func DownloadMaxBytes(n int64) DownloadOption {
	return func(o *downloadOptions) {
		if n > 0 {
			o.maxBytes = n
		}
	}
}

// DownloadMaxEntries bounds the entries of a download's archive
// (DefaultDownloadMaxEntries when not given or not positive).
func DownloadMaxEntries(n int) DownloadOption {
	return func(o *downloadOptions) {
		if n > 0 {
			o.maxEntries = n
		}
	}
}

type downloadOptions struct {
	maxBytes   int64
	maxEntries int
}

func newDownloadOptions(opts []DownloadOption) downloadOptions {
	o := downloadOptions{maxBytes: DefaultDownloadMaxBytes, maxEntries: DefaultDownloadMaxEntries}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// archiveLimit is the most archive bytes a download reads.
func (o downloadOptions) archiveLimit() int64 {
	per := int64(o.maxEntries+1) * headerAllowance
	if o.maxBytes > math.MaxInt64-per {
		return math.MaxInt64
	}
	return o.maxBytes + per
}

// limitedStream passes at most max bytes, then fails with
// ErrArchiveTooLarge: a stream that ends at the bound exactly is whole.
type limitedStream struct {
	r         io.Reader
	left, max int64
}

func (l *limitedStream) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: the archive is over %d bytes", ErrArchiveTooLarge, l.max)
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// extractor reads a download's archive entry by entry, counting each
// against the bounds before anything of it is written.
type extractor struct {
	tr      *tar.Reader
	opts    downloadOptions
	entries int   // entries read so far
	bytes   int64 // regular files' bytes announced so far
}

func newExtractor(r io.Reader, o downloadOptions) *extractor {
	lim := o.archiveLimit()
	return &extractor{tr: tar.NewReader(&limitedStream{r: r, left: lim, max: lim}), opts: o}
}

// next returns the next entry and its checked name ("" for the directory
// itself), or io.EOF at the archive's end.
func (x *extractor) next() (*tar.Header, string, error) {
	hdr, err := x.tr.Next()
	switch {
	case err == io.EOF:
		return nil, "", io.EOF
	case errors.Is(err, tar.ErrInsecurePath):
		return nil, "", fmt.Errorf("%w: %q", ErrUnsafePath, hdr.Name)
	case err != nil:
		return nil, "", streamError(err)
	}
	x.entries++
	if x.entries > x.opts.maxEntries {
		return nil, "", fmt.Errorf("%w: more than %d entries (at %q)", ErrArchiveTooLarge, x.opts.maxEntries, hdr.Name)
	}
	if hdr.Typeflag == tar.TypeReg {
		if hdr.Size < 0 || hdr.Size > x.opts.maxBytes-x.bytes {
			return nil, "", fmt.Errorf("%w: more than %d bytes of files (at %q, %d bytes)", ErrArchiveTooLarge, x.opts.maxBytes, hdr.Name, hdr.Size)
		}
		x.bytes += hdr.Size
	}
	name, err := entryName(hdr.Name)
	if err != nil {
		return nil, "", err
	}
	return hdr, name, nil
}

// streamError keeps a broken stream and a bound as they are.
func streamError(err error) error {
	var te *TransportError
	if errors.As(err, &te) || errors.Is(err, ErrArchiveTooLarge) {
		return err
	}
	return fmt.Errorf("reading archive: %w", err)
}

// extractInto extracts the entries into root, starting with hdr (named
// name) when it is not nil.
func (x *extractor) extractInto(root *os.Root, hdr *tar.Header, name string) error {
	for {
		if hdr == nil {
			var err error
			hdr, name, err = x.next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
		if name != "" { // "" is the directory itself
			if err := makeParents(root, name); err != nil {
				return err
			}
			if err := x.extractEntry(root, hdr, name); err != nil {
				return err
			}
		}
		hdr = nil
	}
}

func (x *extractor) extractEntry(root *os.Root, hdr *tar.Header, name string) error {
	local := filepath.FromSlash(name)
	perm := fs.FileMode(hdr.Mode).Perm()
	existing, err := root.Lstat(local)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	exists := err == nil
	isLink := exists && existing.Mode()&fs.ModeSymlink != 0
	isDir := exists && existing.IsDir()

	switch hdr.Typeflag {
	case tar.TypeDir:
		if isLink {
			return fmt.Errorf("%w: %q is a symbolic link", ErrUnsafePath, name)
		}
		if isDir {
			return nil
		}
		if exists {
			return fmt.Errorf("%w: extracting %q: exists and is not a directory", ErrDestination, name)
		}
		return root.Mkdir(local, perm|0o700)

	case tar.TypeReg, tar.TypeGNUSparse: // the reader expands a sparse file
		if isLink {
			return fmt.Errorf("%w: %q is a symbolic link", ErrUnsafePath, name)
		}
		if isDir {
			return fmt.Errorf("%w: extracting %q: exists and is a directory", ErrDestination, name)
		}
		return x.writeFile(root, local, hdr, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)

	case tar.TypeSymlink:
		if isDir {
			return fmt.Errorf("%w: extracting %q: exists and is a directory", ErrDestination, name)
		}
		if exists {
			if err := root.Remove(local); err != nil {
				return err
			}
		}
		return root.Symlink(filepath.FromSlash(hdr.Linkname), local)

	case tar.TypeXGlobalHeader: // pax defaults, already applied by the reader
		return nil

	case tar.TypeLink:
		target, err := entryName(hdr.Linkname)
		if err != nil {
			return err
		}
		if target == "" {
			return fmt.Errorf("%w: %q links to the directory itself", ErrUnsafePath, name)
		}
		if err := checkNoLinks(root, target); err != nil {
			return err
		}
		if isDir {
			return fmt.Errorf("%w: extracting %q: exists and is a directory", ErrDestination, name)
		}
		if exists {
			if err := root.Remove(local); err != nil {
				return err
			}
		}
		return root.Link(filepath.FromSlash(target), local)
	}
	// Devices, FIFOs and the like are never made, and never dropped
	// silently: the SDKs refuse them the same way.
	return fmt.Errorf("%w: entry %q is not a file, directory or link (type %q)", ErrUnsafePath, name, hdr.Typeflag)
}

// writeFile writes the current entry's data to local with the entry's
// mode and time; flag says how it is opened.
func (x *extractor) writeFile(root *os.Root, local string, hdr *tar.Header, flag int) error {
	perm := fs.FileMode(hdr.Mode).Perm()
	f, err := root.OpenFile(local, flag, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, x.tr); err != nil {
		f.Close()
		if errors.Is(err, ErrArchiveTooLarge) {
			return err
		}
		var te *TransportError
		if errors.As(err, &te) {
			return err
		}
		return fmt.Errorf("extracting %q: %w", hdr.Name, err)
	}
	if err := f.Chmod(perm); err != nil { // the umask cut it, or it existed
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if !hdr.ModTime.IsZero() {
		return root.Chtimes(local, hdr.ModTime, hdr.ModTime)
	}
	return nil
}

// entryName checks an archive name and returns it clean and relative, ""
// for the directory itself.
func entryName(raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("%w: empty name", ErrUnsafePath)
	}
	if strings.HasPrefix(raw, "/") {
		return "", fmt.Errorf("%w: absolute name %q", ErrUnsafePath, raw)
	}
	if os.PathSeparator != '/' && strings.ContainsAny(raw, `\:`) {
		return "", fmt.Errorf("%w: %q", ErrUnsafePath, raw)
	}
	for _, part := range strings.Split(raw, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %q has \"..\"", ErrUnsafePath, raw)
		}
	}
	name := path.Clean(raw)
	if name == "." {
		return "", nil
	}
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", fmt.Errorf("%w: %q", ErrUnsafePath, raw)
	}
	return name, nil
}

// makeParents makes the missing parent directories of name, refusing to go
// through a symbolic link.
func makeParents(root *os.Root, name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	cur := ""
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		fi, err := root.Lstat(filepath.FromSlash(cur))
		if errors.Is(err, fs.ErrNotExist) {
			if err := root.Mkdir(filepath.FromSlash(cur), 0o755); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %q passes through symbolic link %q", ErrUnsafePath, name, cur)
		}
		if !fi.IsDir() {
			return fmt.Errorf("extracting %q: %q is not a directory", name, cur)
		}
	}
	return nil
}

// checkNoLinks refuses a name whose parents include a symbolic link.
func checkNoLinks(root *os.Root, name string) error {
	cur := ""
	for _, part := range strings.Split(path.Dir(name), "/") {
		if part == "." {
			break
		}
		cur = path.Join(cur, part)
		fi, err := root.Lstat(filepath.FromSlash(cur))
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %q passes through symbolic link %q", ErrUnsafePath, name, cur)
		}
	}
	return nil
}
