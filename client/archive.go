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
	"path/filepath"

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
		err := writeTar(pw, localDir, nil)
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

// WriteTar writes the tree under root to w as the uploads send it, with
// names relative to root: files, directories and symbolic links (as links,
// never followed), with their permission bits and times; sockets, devices
// and pipes are left out. A file that changes size while it is read fails
// the archive. The CLI's template build sends its context this way.
func WriteTar(w io.Writer, root string) error { return writeTar(w, root, nil) }

// Skip is what WriteTarSkipping's function answers of a path: Keep it,
// Leave it out (a directory's contents are still walked), or Prune it (a
// directory with everything below it).
type Skip int

const (
	Keep Skip = iota
	Leave
	Prune
)

// WriteTarSkipping is WriteTar leaving out what skip says of each path
// (relative to root, "/"-separated), e.g. what a .dockerignore names.
func WriteTarSkipping(w io.Writer, root string, skip func(rel string, dir bool) (Skip, error)) error {
	return writeTar(w, root, skip)
}

// writeTar writes the tree under root to w, with names relative to root,
// without what skip (when not nil) leaves out.
func writeTar(w io.Writer, root string, skip func(rel string, dir bool) (Skip, error)) error {
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
		if skip != nil {
			s, err := skip(filepath.ToSlash(rel), d.IsDir())
			switch {
			case err != nil:
				return &localError{err}
			case s == Prune && d.IsDir():
				return filepath.SkipDir
			case s != Keep:
				return nil
			}
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
