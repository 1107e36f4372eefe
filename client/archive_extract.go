package client

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/withruntime/withruntime/internal/tarx"
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

// extractor reads a download's archive with the shared extractor
// (internal/tarx), which checks each entry against the bounds, its kind
// and its name before anything of it is written; its refusals are given
// this package's errors.
type extractor struct {
	r *tarx.Reader
}

func newExtractor(r io.Reader, o downloadOptions) *extractor {
	lim := o.archiveLimit()
	return &extractor{r: tarx.NewReader(&limitedStream{r: r, left: lim, max: lim}, tarx.Options{MaxEntries: o.maxEntries, MaxBytes: o.maxBytes})}
}

// next returns the next entry and its checked name ("" for the directory
// itself), or io.EOF at the archive's end.
func (x *extractor) next() (*tar.Header, string, error) {
	hdr, name, err := x.r.Next()
	if err != nil && err != io.EOF {
		return nil, "", archiveError(err)
	}
	return hdr, name, err
}

// extractInto extracts the entries into root, starting with hdr (named
// name) when it is not nil.
func (x *extractor) extractInto(root *os.Root, hdr *tar.Header, name string) error {
	return archiveError(x.r.Extract(root, hdr, name))
}

// writeFile writes the current entry's data to local with the entry's
// mode and time; flag says how it is opened.
func (x *extractor) writeFile(root *os.Root, local string, hdr *tar.Header, flag int) error {
	return archiveError(x.r.WriteFile(root, filepath.ToSlash(local), hdr, flag))
}

// archiveError gives the extractor's refusals this package's errors, and
// keeps a broken stream and the archive's bound as they are.
func archiveError(err error) error {
	var e *tarx.Error
	if !errors.As(err, &e) {
		return err
	}
	var te *TransportError
	if e.Err != nil && (errors.As(e.Err, &te) || errors.Is(e.Err, ErrArchiveTooLarge)) {
		return e.Err
	}
	switch e.Kind {
	case tarx.ErrUnsafe:
		return fmt.Errorf("%w: %s", ErrUnsafePath, e.Msg)
	case tarx.ErrTooLarge:
		return fmt.Errorf("%w: %s", ErrArchiveTooLarge, e.Msg)
	case tarx.ErrDestination:
		return fmt.Errorf("%w: %s", ErrDestination, e.Msg)
	}
	return err
}
