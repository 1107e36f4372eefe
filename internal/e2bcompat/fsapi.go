package e2bcompat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// The files calls the E2B layer makes, as the request's user. Paths are
// absolute (resolvePath) by the time they get here.

// errRootFiles answers file calls as root until withruntime's files API
// can act as root.
var errRootFiles = &Error{Status: http.StatusNotImplemented,
	Message: `acting as "root" on files is not supported by this server yet: omit the user (files are the sandbox user's)`}

func checkFilesUser(sb *Sandbox) error {
	if sb.User == UserRoot {
		return errRootFiles
	}
	return nil
}

func statAs(ctx context.Context, sb *Sandbox, p string) (*api.FileInfo, error) {
	if err := checkFilesUser(sb); err != nil {
		return nil, err
	}
	return sb.C.StatFile(ctx, sb.ID, p)
}

func listAs(ctx context.Context, sb *Sandbox, p string) ([]api.FileInfo, error) {
	if err := checkFilesUser(sb); err != nil {
		return nil, err
	}
	return sb.C.ListFiles(ctx, sb.ID, p)
}

func mkdirAs(ctx context.Context, sb *Sandbox, p string) (*api.FileInfo, error) {
	if err := checkFilesUser(sb); err != nil {
		return nil, err
	}
	return sb.C.MakeDir(ctx, sb.ID, p)
}

func removeAs(ctx context.Context, sb *Sandbox, p string) error {
	if err := checkFilesUser(sb); err != nil {
		return err
	}
	return sb.C.RemoveFile(ctx, sb.ID, p, true)
}

func openAs(ctx context.Context, sb *Sandbox, p string) (io.ReadCloser, error) {
	if err := checkFilesUser(sb); err != nil {
		return nil, err
	}
	return sb.C.OpenFile(ctx, sb.ID, p)
}

func writeAs(ctx context.Context, sb *Sandbox, p string, r io.Reader) (*api.FileInfo, error) {
	if err := checkFilesUser(sb); err != nil {
		return nil, err
	}
	return sb.C.WriteFile(ctx, sb.ID, p, r, 0)
}

// moveAs renames src to dst inside the sandbox with mv, making dst's
// parent first, as E2B's daemon does. -T: dst is the new name even when it
// is an existing directory (a rename, not a move into it).
func moveAs(ctx context.Context, sb *Sandbox, src, dst string) error {
	if err := checkFilesUser(sb); err != nil {
		return err
	}
	if _, err := sb.C.StatFile(ctx, sb.ID, src); err != nil {
		return err
	}
	if _, err := sb.C.MakeDir(ctx, sb.ID, path.Dir(dst)); err != nil {
		return err
	}
	var stderr limitedBuffer
	res, err := sb.C.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"mv", "-T", "--", src, dst}}},
		client.ExecOptions{Stderr: &stderr})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return &Error{Status: http.StatusBadRequest, Message: "move " + src + " to " + dst + ": " + stderr.String()}
	}
	return nil
}

// limitedBuffer keeps the first 4 KiB written to it: enough of a
// command's error output for a message.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(trimNewline(l.b)) }

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// isNotFound reports whether err is withruntime's not_found.
func isNotFound(err error) bool {
	var apiErr *client.APIError
	return errors.As(err, &apiErr) && apiErr.Code == client.CodeNotFound
}
