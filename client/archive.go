package client

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// The archive routes move a tar stream. Entry names are relative to the
// directory named by path: an upload is extracted into it, and a download
// of a directory holds its contents under names such as "a/b.txt" (a
// download of one file holds that file under its base name).

// DownloadArchive opens a tar stream of the file or directory at path in
// sandbox id. The caller closes it. To extract it safely use DownloadDir,
// which refuses names that would leave the target directory.
func (c *Client) DownloadArchive(ctx context.Context, id, path string) (io.ReadCloser, error) {
	return c.openStream(ctx, id, "/archive", path, "application/x-tar")
}

// UploadArchive extracts the tar stream r into directory path of sandbox id
// (made if missing), inside the sandbox.
func (c *Client) UploadArchive(ctx context.Context, id, path string, r io.Reader) (*api.ArchiveResult, error) {
	p, err := sandboxPath(id, "/archive")
	if err != nil {
		return nil, err
	}
	req := request{
		method:      http.MethodPut,
		path:        p,
		query:       c.pathQuery(path),
		body:        r,
		contentType: "application/x-tar",
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var res api.ArchiveResult
	if err := decodeJSON(ctx, req.op(c.baseURL), resp, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// UploadDir copies the local directory localDir into remoteDir of sandbox
// id as one tar stream, made while it is sent. Regular files, directories
// and symbolic links (as links, never followed) are copied; other kinds of
// files are skipped. Owners are left to the sandbox.
func (c *Client) UploadDir(ctx context.Context, id, localDir, remoteDir string) (*api.ArchiveResult, error) {
	fi, err := os.Stat(localDir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", localDir)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := writeTar(pw, localDir)
		pw.CloseWithError(err)
		done <- err
	}()
	res, err := c.UploadArchive(ctx, id, remoteDir, pr)
	// The request may end before the archive does (the server refused it,
	// or ctx ended): unblock the writer.
	pr.CloseWithError(errUploadEnded)
	walkErr := <-done
	var le *localError
	if errors.As(walkErr, &le) {
		return nil, le.err
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

var errUploadEnded = errors.New("upload ended")

// localError marks a failure to read the local tree, as opposed to a
// failure to send it.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }

// writeTar writes the tree under root to w, with names relative to root.
func writeTar(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return &localError{err}
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return &localError{err}
		}
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return &localError{err}
		}
		hdr := &tar.Header{
			Name:    filepath.ToSlash(rel),
			Mode:    int64(info.Mode().Perm()),
			ModTime: info.ModTime(),
			Format:  tar.FormatPAX,
		}
		switch {
		case info.IsDir():
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
			return tw.WriteHeader(hdr)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return &localError{err}
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, filepath.ToSlash(target)
			return tw.WriteHeader(hdr)
		case info.Mode().IsRegular():
			return writeTarFile(tw, hdr, p, info.Size())
		}
		return nil // sockets, devices, pipes
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func writeTarFile(tw *tar.Writer, hdr *tar.Header, p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return &localError{err}
	}
	defer f.Close()
	hdr.Typeflag, hdr.Size = tar.TypeReg, size
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, localReader{io.LimitReader(f, size)})
	if err != nil {
		return err
	}
	if n != size {
		return &localError{fmt.Errorf("%s: changed while being read", p)}
	}
	return nil
}

// localReader marks its read errors as local ones.
type localReader struct{ r io.Reader }

func (l localReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if err != nil && err != io.EOF {
		err = &localError{err}
	}
	return n, err
}

// DownloadDir copies the directory remoteDir of sandbox id into the local
// directory localDir (made if missing), extracting the tar stream as it
// arrives. Files already there are overwritten.
//
// The archive comes from the sandbox, whose contents are untrusted: an
// entry with "..", an absolute name, or a name that passes through a
// symbolic link (one already there or one the archive made) stops the
// extraction with an error matching ErrUnsafePath. Symbolic links in the
// archive are made as links and never followed. Entries extracted before
// such an error stay.
func (c *Client) DownloadDir(ctx context.Context, id, remoteDir, localDir string) error {
	rc, err := c.DownloadArchive(ctx, id, remoteDir)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := os.MkdirAll(localDir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(localDir)
	if err != nil {
		return err
	}
	defer root.Close()
	return extractTar(root, rc)
}

// extractTar extracts r into root. os.Root already refuses to leave root;
// the checks here also refuse any symbolic link on the way, inside root or
// not.
func extractTar(root *os.Root, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, tar.ErrInsecurePath) {
			return fmt.Errorf("%w: %q", ErrUnsafePath, hdr.Name)
		}
		if err != nil {
			var te *TransportError
			if errors.As(err, &te) {
				return err
			}
			return fmt.Errorf("reading archive: %w", err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue // the directory itself
		}
		if err := makeParents(root, name); err != nil {
			return err
		}
		if err := extractEntry(root, tr, hdr, name); err != nil {
			return err
		}
	}
}

func extractEntry(root *os.Root, tr *tar.Reader, hdr *tar.Header, name string) error {
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
			return fmt.Errorf("extracting %q: exists and is not a directory", name)
		}
		return root.Mkdir(local, perm|0o700)

	case tar.TypeReg:
		if isLink {
			return fmt.Errorf("%w: %q is a symbolic link", ErrUnsafePath, name)
		}
		if isDir {
			return fmt.Errorf("extracting %q: exists and is a directory", name)
		}
		f, err := root.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			var te *TransportError
			if errors.As(err, &te) {
				return err
			}
			return fmt.Errorf("extracting %q: %w", name, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		if exists {
			if err := root.Chmod(local, perm); err != nil {
				return err
			}
		}
		if !hdr.ModTime.IsZero() {
			return root.Chtimes(local, hdr.ModTime, hdr.ModTime)
		}
		return nil

	case tar.TypeSymlink:
		if isDir {
			return fmt.Errorf("extracting %q: exists and is a directory", name)
		}
		if exists {
			if err := root.Remove(local); err != nil {
				return err
			}
		}
		return root.Symlink(filepath.FromSlash(hdr.Linkname), local)

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
			return fmt.Errorf("extracting %q: exists and is a directory", name)
		}
		if exists {
			if err := root.Remove(local); err != nil {
				return err
			}
		}
		return root.Link(filepath.FromSlash(target), local)
	}
	return nil // devices, fifos and the like are not made
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
