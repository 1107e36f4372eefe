package e2bcompat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

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

// listAs lists directory p, at most limit entries (1 to
// api.MaxListLimit): the answer says Truncated when p holds more.
func listAs(ctx context.Context, sb *Sandbox, p string, limit int) (*api.FileList, error) {
	return filesClient(sb).ListFilesWith(ctx, sb.ID, p, client.ListFilesOptions{Limit: limit})
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

func writeAs(ctx context.Context, sb *Sandbox, p string, r io.Reader, attrs map[string]string) (*api.FileInfo, error) {
	if err := ensureParents(ctx, sb, p); err != nil {
		return nil, err
	}
	fi, err := filesClient(sb).WriteFileWith(ctx, sb.ID, p, r, client.WriteFileOptions{Attrs: attrs})
	if err != nil {
		return nil, err
	}
	return fi, checkMetadataKept(attrs, fi)
}

// ensureParents makes the directories missing above p, outside the
// user's home, as root and owned by the user, when the user may not make
// them in the nearest existing one, as E2B's daemon does (it runs as root
// and gives the user what it makes): a write as "user" of /0/f makes /0
// although only root may write /. It changes no existing directory, and
// does nothing for root, who needs no help; the sandbox's user is root
// whenever it likes (sudo), so this opens nothing.
func ensureParents(ctx context.Context, sb *Sandbox, p string) error {
	home := homeOf(sb.User)
	if sb.User == UserRoot || p == home || strings.HasPrefix(p, home+"/") {
		return nil
	}
	root := *sb
	root.User = UserRoot
	var missing []string
	for d := path.Dir(p); ; d = path.Dir(d) {
		fi, err := statAs(ctx, &root, d)
		if err == nil {
			if mayWrite(fi, sb.User) {
				return nil // the files API makes the rest as the user
			}
			break
		}
		if !isNotFound(err) || d == "/" {
			return err
		}
		missing = append([]string{d}, missing...)
	}
	if len(missing) == 0 {
		return nil
	}
	argv := append([]string{"install", "-d", "-o", sb.User, "-g", sb.User, "--"}, missing...)
	res, stderr, err := runTool(ctx, sb, api.ExecRequest{Cmd: api.Command{Argv: argv}, User: UserRoot}, killTimeout)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return &Error{Status: http.StatusBadRequest, Message: "making the folders above " + p + ": " + stderr}
	}
	return nil
}

// mayWrite reports whether user may make entries in directory fi by its
// permission bits, or whether that cannot be told (an agent that names no
// owner): then the files API decides, as before.
func mayWrite(fi *api.FileInfo, user string) bool {
	perm := fi.Mode & 0o777
	return fi.Owner == "" || perm&0o002 != 0 || fi.Owner == user && perm&0o200 != 0 || fi.Group == user && perm&0o020 != 0
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
	req := api.ExecRequest{Cmd: api.Command{Argv: []string{"mv", "-T", "--", src, dst}}, User: sb.User}
	res, stderr, err := runTool(ctx, sb, req, moveTimeout)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return &Error{Status: http.StatusBadRequest, Message: "move " + src + " to " + dst + ": " + stderr}
	}
	return nil
}

// Timeouts of the commands the layer runs for itself: a rename within one
// filesystem is instant, across two it copies.
const (
	moveTimeout = 2 * time.Minute
	killTimeout = 15 * time.Second
)

// runTool runs a command of the layer's own within timeout (the command's
// own timeout_ms and the call's), its stdout dropped and the tail of its
// stderr returned for a message.
func runTool(ctx context.Context, sb *Sandbox, req api.ExecRequest, timeout time.Duration) (*client.ExecResult, string, error) {
	req.TimeoutMs = timeout.Milliseconds()
	ctx, cancel := context.WithTimeout(ctx, timeout+5*time.Second)
	defer cancel()
	var stderr tailBuffer
	res, err := sb.C.Exec(ctx, sb.ID, req, client.ExecOptions{Stdout: io.Discard, Stderr: &stderr})
	if err != nil {
		return nil, "", err
	}
	return res, stderr.String(), nil
}

// tailCap is how much of a command's error output a message carries.
const tailCap = 4 << 10

// tailBuffer keeps the last tailCap bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= tailCap {
		t.b = append(t.b[:0], p[len(p)-tailCap:]...)
		return n, nil
	}
	if over := len(t.b) + len(p) - tailCap; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	t.b = append(t.b, p...)
	return n, nil
}

func (t *tailBuffer) String() string { return strings.ToValidUTF8(string(trimNewline(t.b)), "") }

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
