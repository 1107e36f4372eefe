package client

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// DownloadDir copies the directory remoteDir of sandbox id into the local
// directory localDir (made if missing), extracting the tar stream as it
// arrives: the directory's contents land in localDir (a file remoteDir
// lands in it under its own name). Files already there are overwritten.
//
// The archive comes from the sandbox, whose contents are untrusted: an
// entry with "..", an absolute name, or a name that passes through a
// symbolic link (one already there or one the archive made) stops the
// extraction with an error matching ErrUnsafePath. Symbolic links in the
// archive are made as links and never followed. An archive past the bounds
// (DefaultDownloadMaxEntries entries, DefaultDownloadMaxBytes bytes of
// files, unless opts raise them) stops with ErrArchiveTooLarge. Entries
// extracted before such an error stay.
func (c *Client) DownloadDir(ctx context.Context, id, remoteDir, localDir string, opts ...DownloadOption) error {
	rc, err := c.DownloadArchive(ctx, id, remoteDir)
	if err != nil {
		return err
	}
	return extractDir(rc, localDir, opts)
}

// extractDir extracts the archive rc into localDir (made if missing) and
// closes rc.
func extractDir(rc io.ReadCloser, localDir string, opts []DownloadOption) error {
	defer rc.Close()
	if err := os.MkdirAll(localDir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(localDir)
	if err != nil {
		return err
	}
	defer root.Close()
	return newExtractor(rc, newDownloadOptions(opts)).extractInto(root, nil, "")
}

// DownloadResult says what a Download wrote.
type DownloadResult struct {
	Dir     bool   // the archive held a directory, not one file
	Path    string // the file, or the directory the contents went into
	Entries int    // the archive's entries
	Bytes   int64  // bytes of regular files
}

// Download copies src of sandbox id to the local path dst with docker
// cp's rules. Whether src is one file or a directory is decided from the
// archive the sandbox sends, never from an earlier stat: it is one file
// when it holds exactly one entry, a regular file or a symbolic link named
// as src's own name (path.Base of src as given); anything else is a
// directory's contents. Names come only from src, dst and the archive's
// checked entries, and every write stays beneath the directory that holds
// the target (an os.Root).
//
//   - One file onto an existing directory lands inside it under src's own
//     name (replacing a file or link of that name, never a directory);
//     onto an existing file it replaces that file; onto a missing path it
//     becomes that path. A dst ending in "/" must then be a directory.
//   - A directory onto an existing directory lands inside it under src's
//     own name (merged into one already there, files overwritten); onto a
//     missing path it becomes that path; onto a file it is refused.
//   - A src ending in "/." (or "/") copies the directory's contents into
//     dst, an existing directory or one made: only then are the entries
//     extracted into a directory that existed.
//
// A file archive is staged under a temporary name beside its target until
// its end is seen, so an archive that turns out to hold more lands as a
// directory, never as entries spilled into dst. The archive's entries and
// bytes are bounded as in DownloadDir (ErrArchiveTooLarge); a misfit of
// archive and destination is ErrDestination; an unsafe entry is
// ErrUnsafePath.
func (c *Client) Download(ctx context.Context, id, src, dst string, opts ...DownloadOption) (*DownloadResult, error) {
	name, contents, err := sourceName(src)
	if err != nil {
		return nil, err
	}
	if dst == "" {
		return nil, errors.New("empty destination")
	}
	dstDir, err := isLocalDir(dst)
	if err != nil {
		return nil, err
	}
	rc, err := c.DownloadArchive(ctx, id, src)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	d := &download{x: newExtractor(rc, newDownloadOptions(opts)), name: name, dst: dst, dstDir: dstDir}
	if err := d.run(contents); err != nil {
		return nil, err
	}
	return &d.res, nil
}

// sourceName returns src's own name, or contents when src names a
// directory's contents ("x/.", ".", "/").
func sourceName(src string) (name string, contents bool, err error) {
	if src == "" {
		return "", false, errors.New("empty source path")
	}
	for _, part := range strings.Split(src, "/") {
		if part == ".." {
			return "", false, fmt.Errorf("source path %q must not contain \"..\"", src)
		}
	}
	if src == "." || strings.HasSuffix(src, "/.") {
		return "", true, nil
	}
	name = path.Base(path.Clean(src))
	if name == "/" {
		return "", true, nil
	}
	if !filepath.IsLocal(name) {
		return "", false, fmt.Errorf("source path %q has no name usable here", src)
	}
	return name, false, nil
}

// isLocalDir says whether dst is an existing directory, following links:
// the local path is the user's own.
func isLocalDir(dst string) (bool, error) {
	fi, err := os.Stat(dst)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR): // "file/"
		return false, nil
	case err != nil:
		return false, err
	}
	return fi.IsDir(), nil
}

// download is one Download: where its writes may go and what it wrote.
type download struct {
	x      *extractor
	name   string // the source's own name, "" for its contents
	dst    string
	dstDir bool // dst is an existing directory
	res    DownloadResult

	parent *os.Root // the directory holding the target
	target string   // the target's name in parent, "." for parent itself
	staged string   // a file entry held under a temporary name in parent
	link   bool     // the staged entry is a symbolic link
}

func (d *download) run(contents bool) (retErr error) {
	first, firstName, err := d.x.next()
	if err != nil && err != io.EOF {
		return err
	}
	clean := filepath.Clean(d.dst)
	switch {
	case d.dstDir && contents:
		d.parent, err = os.OpenRoot(clean)
		d.target = "."
	case d.dstDir:
		d.parent, err = os.OpenRoot(clean)
		d.target = d.name
	default:
		d.parent, err = os.OpenRoot(filepath.Dir(clean))
		d.target = filepath.Base(clean)
	}
	if err != nil {
		return err
	}
	defer d.parent.Close()
	defer func() {
		if d.staged != "" {
			d.parent.Remove(d.staged)
		}
	}()

	one := !contents && first != nil && firstName == d.name &&
		(first.Typeflag == tar.TypeReg || first.Typeflag == tar.TypeSymlink)
	var next *tar.Header
	var nextName string
	if one {
		if err := d.stage(first); err != nil {
			return err
		}
		next, nextName, err = d.x.next()
		if err == io.EOF {
			return d.placeFile()
		}
		if err != nil {
			return err
		}
		first = nil // staged: it goes into the directory below
	}
	root, err := d.openDir()
	if err != nil {
		return err
	}
	defer root.Close()
	d.res.Dir = true
	if d.staged != "" {
		if err := d.unstage(root); err != nil {
			return err
		}
	} else if first != nil {
		next, nextName = first, firstName
	}
	if next != nil {
		err = d.x.extractInto(root, next, nextName)
	}
	d.res.Entries, d.res.Bytes = d.x.r.Entries, d.x.r.Declared
	return err
}

// stage writes a file or link entry under a temporary name in parent.
func (d *download) stage(hdr *tar.Header) error {
	var b [8]byte
	rand.Read(b[:])
	tmp := fmt.Sprintf(".withruntime-cp-%x", b)
	if hdr.Typeflag == tar.TypeSymlink {
		if err := d.parent.Symlink(filepath.FromSlash(hdr.Linkname), tmp); err != nil {
			return err
		}
		d.staged, d.link = tmp, true
		return nil
	}
	d.staged = tmp // removed on failure even if half written
	return d.x.writeFile(d.parent, tmp, hdr, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
}

// placeFile moves the staged file to its target: the archive held it
// alone.
func (d *download) placeFile() error {
	if !d.dstDir && (strings.HasSuffix(d.dst, "/") || strings.HasSuffix(d.dst, string(filepath.Separator))) {
		if _, err := os.Lstat(filepath.Clean(d.dst)); err == nil {
			return fmt.Errorf("%w: %s is not a directory", ErrDestination, d.dst)
		}
		return fmt.Errorf("directory %s does not exist: %w", d.dst, fs.ErrNotExist)
	}
	fi, err := d.parent.Lstat(d.target)
	if err == nil && fi.IsDir() {
		return fmt.Errorf("%w: cannot replace directory %s with a file", ErrDestination, d.where())
	}
	if err := d.parent.Rename(d.staged, d.target); err != nil {
		return err
	}
	d.staged = ""
	d.res = DownloadResult{Path: d.where(), Entries: d.x.r.Entries, Bytes: d.x.r.Declared}
	return nil
}

// openDir makes the directory target (or opens the one there) for an
// archive of a directory.
func (d *download) openDir() (*os.Root, error) {
	d.res.Path = d.where()
	if d.target == "." {
		return d.parent.OpenRoot(".")
	}
	fi, err := d.parent.Lstat(d.target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := d.parent.Mkdir(d.target, 0o755); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%w: %s is a symbolic link", ErrUnsafePath, d.where())
	case !fi.IsDir():
		return nil, fmt.Errorf("%w: cannot copy a directory onto file %s", ErrDestination, d.where())
	}
	return d.parent.OpenRoot(d.target)
}

// unstage moves the staged entry into the directory, under its name there.
func (d *download) unstage(root *os.Root) error {
	fi, err := root.Lstat(d.name)
	if err == nil {
		switch {
		case fi.IsDir():
			return fmt.Errorf("extracting %q: exists and is a directory", d.name)
		case fi.Mode()&fs.ModeSymlink != 0 && !d.link:
			return fmt.Errorf("%w: %q is a symbolic link", ErrUnsafePath, d.name) // never written through
		}
	}
	to := d.name
	if d.target != "." {
		to = filepath.Join(d.target, d.name)
	}
	if err := d.parent.Rename(d.staged, to); err != nil {
		return err
	}
	d.staged = ""
	return nil
}

// where is the target as the caller would name it.
func (d *download) where() string {
	if d.dstDir {
		return filepath.Join(d.dst, d.target)
	}
	return d.dst
}
