package cli

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// "sandbox cp" follows docker cp: one side is ID:PATH inside a sandbox, the
// other a local path or "-" (a tar stream on stdin or stdout). A directory
// copied onto an existing directory lands inside it under its own name,
// onto a missing path it becomes that path; a SRC ending in "/." copies
// the directory's contents. A file copied onto an existing directory lands
// inside it, otherwise it becomes DST.

const cpAbout = `Copies a file or a directory between a sandbox and this machine, like
docker cp. One of SRC and DST is ID:PATH, a path inside sandbox ID (relative
ones are under /workspace), the other a local path; "-" instead of the local
path reads a tar stream from stdin (extracted into the sandbox directory DST)
or writes one to stdout (the file, or the directory's contents).

A directory copied onto an existing directory lands inside it under its own
name; onto a missing path it becomes that path. A SRC ending in "/." copies
the directory's contents. A file copied onto an existing directory lands
inside it; otherwise it becomes DST. Modes are kept; symbolic links are
copied as links, never followed. A local path holding a colon is written
with a slash in it, such as ./a:b.`

// cpSide is one side of "sandbox cp".
type cpSide struct {
	id   string // the sandbox, "" on the local side
	path string // "-" on the local side: a tar stream
}

func (c cpSide) remote() bool { return c.id != "" }

// parseCpSide reads one argument. As with docker cp, ID:PATH is the
// sandbox side unless what comes before the colon holds a slash or the
// argument starts with "." or "/"; "ID:" alone is the workspace.
func parseCpSide(arg string) (cpSide, error) {
	if arg == "" {
		return cpSide{}, errors.New("empty path")
	}
	i := strings.IndexByte(arg, ':')
	if i <= 0 || arg[0] == '.' || strings.ContainsRune(arg[:i], '/') {
		return cpSide{path: arg}, nil
	}
	p := arg[i+1:]
	if p == "" {
		p = "."
	}
	return cpSide{id: arg[:i], path: p}, nil
}

// parseCpArgs reads SRC and DST: exactly one of them is in a sandbox.
func parseCpArgs(args []string) (src, dst cpSide, err error) {
	if len(args) != 2 {
		return src, dst, fmt.Errorf("want SRC and DST, got %d arguments", len(args))
	}
	if src, err = parseCpSide(args[0]); err != nil {
		return src, dst, fmt.Errorf("SRC: %w", err)
	}
	if dst, err = parseCpSide(args[1]); err != nil {
		return src, dst, fmt.Errorf("DST: %w", err)
	}
	switch {
	case src.remote() && dst.remote():
		return src, dst, errors.New("both sides are in a sandbox: one of SRC and DST must be a local path")
	case !src.remote() && !dst.remote():
		return src, dst, errors.New("both sides are local: one of SRC and DST must be ID:PATH in a sandbox")
	}
	return src, dst, nil
}

// cpKind is what the destination is before the copy.
type cpKind int

const (
	cpMissing cpKind = iota
	cpFile
	cpDir
)

// cpSpec is what is copied.
type cpSpec struct {
	name     string // the source's own name, "a" for ".../a"
	dir      bool
	contents bool // SRC ends in "/.": a directory's contents
}

// cpTarget returns where the source lands: the path the file is written to,
// or the directory the contents of a directory go into. join is the
// destination side's path join.
func cpTarget(src cpSpec, dst string, kind cpKind, join func(...string) string) (string, error) {
	slash := strings.HasSuffix(dst, "/")
	if src.dir {
		switch {
		case kind == cpFile:
			return "", &cliError{client.CodeConflict, fmt.Sprintf("cannot copy a directory onto file %s", dst)}
		case kind == cpDir && !src.contents && src.name != "/":
			return join(dst, src.name), nil
		}
		return dst, nil
	}
	switch {
	case src.contents:
		return "", &cliError{client.CodeConflict, "SRC ends in \"/.\" but is not a directory"}
	case kind == cpDir:
		return join(dst, src.name), nil
	case kind == cpFile && slash:
		return "", &cliError{client.CodeConflict, fmt.Sprintf("%s is not a directory", dst)}
	case kind == cpMissing && slash:
		return "", &cliError{client.CodeNotFound, fmt.Sprintf("directory %s does not exist", dst)}
	}
	return dst, nil
}

// endsInDot says whether p names "the contents of": "." or ".../.".
func endsInDot(p string) bool {
	return p == "." || strings.HasSuffix(p, "/.")
}

func (a *App) sandboxCp(cmd *command, s streams) runFunc {
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		src, dst, err := parseCpArgs(pos)
		if err != nil {
			return cmd.usageError(s, "%s", err)
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		if src.remote() {
			err = copyOut(ctx, c, s, src, dst.path)
		} else {
			err = copyIn(ctx, c, s, src.path, dst)
		}
		if err != nil {
			report(s.stderr, cpError(err))
			return exitFailure
		}
		return exitOK
	}
}

// copyIn copies the local src into the sandbox.
func copyIn(ctx context.Context, c *client.Client, s streams, src string, dst cpSide) error {
	if src == "-" {
		_, err := c.UploadArchive(ctx, dst.id, dst.path, s.stdin)
		return err
	}
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	kind, err := remoteKind(ctx, c, dst)
	if err != nil {
		return err
	}
	spec := cpSpec{name: filepath.Base(abs), dir: fi.IsDir(), contents: endsInDot(filepath.ToSlash(src))}
	target, err := cpTarget(spec, dst.path, kind, path.Join)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		_, err = c.UploadDir(ctx, dst.id, src, target)
		return err
	}
	return uploadOne(ctx, c, dst.id, src, fi, target)
}

// remoteKind says what path is in the sandbox. A symbolic link counts as a
// file: it is replaced, not followed.
func remoteKind(ctx context.Context, c *client.Client, side cpSide) (cpKind, error) {
	fi, err := c.StatFile(ctx, side.id, side.path)
	switch {
	case errors.Is(err, client.ErrNotFound):
		// An unknown sandbox is not_found too: tell it apart.
		if _, gerr := c.GetSandbox(ctx, side.id); gerr != nil {
			return 0, gerr
		}
		return cpMissing, nil
	case err != nil:
		return 0, err
	case fi.Type == api.FileTypeDir:
		return cpDir, nil
	}
	return cpFile, nil
}

// uploadOne sends one file or symbolic link as a one-entry archive into the
// directory of target, so that it keeps its mode and time at any size.
func uploadOne(ctx context.Context, c *client.Client, id, src string, fi fs.FileInfo, target string) error {
	hdr := &tar.Header{
		Name:    path.Base(target),
		Mode:    int64(fi.Mode().Perm()),
		ModTime: fi.ModTime(),
		Format:  tar.FormatPAX,
	}
	var body io.Reader
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		link, err := os.Readlink(src)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, filepath.ToSlash(link)
	case fi.Mode().IsRegular():
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		hdr.Typeflag, hdr.Size, body = tar.TypeReg, fi.Size(), f
	default:
		return &cliError{client.CodeInvalidRequest, fmt.Sprintf("%s is not a regular file, directory or symbolic link", src)}
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := writeOne(pw, hdr, body)
		pw.CloseWithError(err)
		done <- err
	}()
	_, err := c.UploadArchive(ctx, id, path.Dir(target), pr)
	// The request may end before the archive does: unblock the writer.
	pr.CloseWithError(errCpUploadEnded)
	if werr := <-done; werr != nil && !errors.Is(werr, errCpUploadEnded) {
		return werr // reading the local file failed
	}
	return err
}

var errCpUploadEnded = errors.New("upload ended")

func writeOne(w io.Writer, hdr *tar.Header, body io.Reader) error {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if body != nil {
		n, err := io.Copy(tw, io.LimitReader(body, hdr.Size))
		if err != nil {
			return err
		}
		if n != hdr.Size {
			return fmt.Errorf("%s: changed while being read", hdr.Name)
		}
	}
	return tw.Close()
}

// copyOut copies src in the sandbox to the local dst. Whatever the sandbox
// sends lands through client.DownloadDir (no name may leave its directory
// or pass through a symbolic link; links are made, never followed), or, for
// one file onto a path the user named, as the file's bytes only.
func copyOut(ctx context.Context, c *client.Client, s streams, src cpSide, dst string) error {
	if dst == "-" {
		rc, err := c.DownloadArchive(ctx, src.id, src.path)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(s.stdout, rc)
		return err
	}
	fi, err := c.StatFile(ctx, src.id, src.path)
	if err != nil {
		return err
	}
	kind, err := localKind(dst)
	if err != nil {
		return err
	}
	spec := cpSpec{name: path.Base(fi.Path), dir: fi.Type == api.FileTypeDir, contents: endsInDot(src.path)}
	target, err := cpTarget(spec, dst, kind, filepath.Join)
	if err != nil {
		return err
	}
	switch {
	case spec.dir:
		return c.DownloadDir(ctx, src.id, src.path, target)
	case fi.Type == api.FileTypeOther:
		return &cliError{client.CodeConflict, fmt.Sprintf("%s is not a regular file, directory or symbolic link", fi.Path)}
	case kind == cpDir:
		// The archive of one file holds it under its own name.
		return c.DownloadDir(ctx, src.id, src.path, dst)
	case fi.Type == api.FileTypeSymlink:
		if kind == cpFile {
			if err := os.Remove(target); err != nil {
				return err
			}
		}
		return os.Symlink(filepath.FromSlash(fi.Target), target)
	}
	return downloadFile(ctx, c, src, fi, target)
}

// localKind says what path is here, following symbolic links: the local
// side is the user's own.
func localKind(p string) (cpKind, error) {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return cpMissing, nil
	case err != nil:
		return 0, err
	case fi.IsDir():
		return cpDir, nil
	}
	return cpFile, nil
}

// downloadFile writes the sandbox file src to the local path target with
// the file's mode and time.
func downloadFile(ctx context.Context, c *client.Client, src cpSide, fi *api.FileInfo, target string) error {
	rc, err := c.OpenFile(ctx, src.id, src.path)
	if err != nil {
		return err
	}
	defer rc.Close()
	perm := fs.FileMode(fi.Mode).Perm()
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil { // the umask cut it, or it existed
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(target, fi.ModTime, fi.ModTime)
}

// cpError gives local failures a code: the API's errors keep theirs.
func cpError(err error) error {
	var ae *client.APIError
	var te *client.TransportError
	var ce *cliError
	switch {
	case errors.As(err, &ae), errors.As(err, &te), errors.As(err, &ce):
		return err
	case errors.Is(err, client.ErrUnsafePath):
		return &cliError{client.CodeConflict, "refused the sandbox's archive: " + err.Error()}
	case errors.Is(err, fs.ErrNotExist):
		return &cliError{client.CodeNotFound, err.Error()}
	case errors.Is(err, fs.ErrExist), errors.Is(err, fs.ErrPermission):
		return &cliError{client.CodeConflict, err.Error()}
	}
	return err
}
