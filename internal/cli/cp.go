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
// other a local path or "-" (a tar stream on stdin or stdout). Copies in
// stat the sandbox's side to find where the source lands; copies out never
// trust what the sandbox says about its side: client.Download decides file
// or directory from the archive it receives, and every name comes from the
// arguments or from the archive's checked entries.

const cpAbout = `Copies a file or a directory between a sandbox and this machine, like
docker cp. One of SRC and DST is ID:PATH, a path inside sandbox ID (relative
ones are under /workspace), the other a local path; "-" instead of the local
path reads a tar stream from stdin (extracted into the sandbox directory DST)
or writes one to stdout (the file, or the directory's contents).

A directory copied onto an existing directory lands inside it under its own
name (merged into one of that name, files overwritten); onto a missing path
it becomes that path. A SRC ending in "/." copies the directory's contents
into DST: only then is anything extracted straight into a directory that
already existed. A file copied onto an existing directory lands inside it
under its own name; onto a file it replaces it; otherwise it becomes DST.
Modes are kept; symbolic links are copied as links, never followed. A local
path holding a colon is written with a slash in it, such as ./a:b.

From a sandbox, what arrives is untrusted. Whether SRC is a file or a
directory is decided from the archive received, not from an earlier look:
it is one file only when the archive holds that one file (or link) under
SRC's own name; the file is kept under a temporary name (.withruntime-cp-*)
where it lands until the archive's end proves it. Its own name is the last element of SRC
as given here, never a name the sandbox reports. No entry may leave the
target, pass through a symbolic link, replace a directory with a file or a
file with a directory. A download stops with payload_too_large past
--max-entries entries (default 1,000,000) or --max-bytes bytes of files
(default 10G; with DST "-", of the tar stream): raise them for larger trees.
What was written before such an error stays.

Inside the sandbox the copy acts as --user (user by default, or root): it
reads and writes only what that user may, and what it makes belongs to it.`

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
	bounds := cpBoundFlags(cmd.fs)
	user := cmd.fs.StringP("user", "u", "", "act inside the sandbox as `USER`: user (the default) or root")
	return func(ctx context.Context, pos []string) int {
		src, dst, err := parseCpArgs(pos)
		if err != nil {
			return cmd.usageError(s, "%s", err)
		}
		if err := api.CheckUser(*user); err != nil {
			return cmd.usageError(s, "--user: %s", err)
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		if *user != "" {
			c = c.AsFilesUser(*user)
		}
		if src.remote() {
			err = copyOut(ctx, c, s, src, dst.path, bounds)
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

// copyOut copies src in the sandbox to the local dst. client.Download
// decides from the archive whether src is a file or a directory and
// extracts it beneath dst's directory; the stat of an earlier version of
// this command let a sandbox choose where its archive landed.
func copyOut(ctx context.Context, c *client.Client, s streams, src cpSide, dst string, b *cpBounds) error {
	if dst == "-" {
		rc, err := c.DownloadArchive(ctx, src.id, src.path)
		if err != nil {
			return err
		}
		defer rc.Close()
		return copyStream(s.stdout, rc, int64(b.maxBytes))
	}
	_, err := c.Download(ctx, src.id, src.path, dst, b.options()...)
	return err
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
	case errors.Is(err, client.ErrArchiveTooLarge):
		return &cliError{client.CodePayloadTooLarge, err.Error() + " (raise --max-entries or --max-bytes to copy more)"}
	case errors.Is(err, client.ErrDestination):
		return &cliError{client.CodeConflict, strings.TrimPrefix(err.Error(), client.ErrDestination.Error()+": ")}
	case errors.Is(err, fs.ErrNotExist):
		return &cliError{client.CodeNotFound, err.Error()}
	case errors.Is(err, fs.ErrExist), errors.Is(err, fs.ErrPermission):
		return &cliError{client.CodeConflict, err.Error()}
	}
	return err
}
