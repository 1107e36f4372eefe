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

// The files calls the E2B layer makes, as the request's user (the files
// API's user=root for root: what root makes is root's). Paths are
// absolute (resolvePath) by the time they get here.

func filesClient(sb *Sandbox) *client.Client {
	if sb.User == UserRoot {
		return sb.C.AsFilesUser(api.UserRoot)
	}
	return sb.C
}

func statAs(ctx context.Context, sb *Sandbox, p string) (*api.FileInfo, error) {
	return filesClient(sb).StatFile(ctx, sb.ID, p)
}

func listAs(ctx context.Context, sb *Sandbox, p string) ([]api.FileInfo, error) {
	return filesClient(sb).ListFiles(ctx, sb.ID, p)
}

func mkdirAs(ctx context.Context, sb *Sandbox, p string) (*api.FileInfo, error) {
	return filesClient(sb).MakeDir(ctx, sb.ID, p)
}

func removeAs(ctx context.Context, sb *Sandbox, p string) error {
	return filesClient(sb).RemoveFile(ctx, sb.ID, p, true)
}

func openAs(ctx context.Context, sb *Sandbox, p string) (io.ReadCloser, error) {
	return filesClient(sb).OpenFile(ctx, sb.ID, p)
}

func writeAs(ctx context.Context, sb *Sandbox, p string, r io.Reader) (*api.FileInfo, error) {
	return filesClient(sb).WriteFile(ctx, sb.ID, p, r, 0)
}

// moveAs renames src to dst inside the sandbox with mv run as the
// request's user, making dst's parent first, as E2B's daemon does. -T:
// dst is the new name even when it is an existing directory (a rename,
// not a move into it).
func moveAs(ctx context.Context, sb *Sandbox, src, dst string) error {
	if _, err := statAs(ctx, sb, src); err != nil {
		return err
	}
	if _, err := mkdirAs(ctx, sb, path.Dir(dst)); err != nil {
		return err
	}
	var stderr limitedBuffer
	req := api.ExecRequest{Cmd: api.Command{Argv: []string{"mv", "-T", "--", src, dst}}, User: sb.User}
	res, err := sb.C.Exec(ctx, sb.ID, req, client.ExecOptions{Stderr: &stderr})
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
