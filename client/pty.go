package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
)

// PTYOptions says what OpenPTY starts, or which terminal it attaches to.
type PTYOptions struct {
	// Cols and Rows are the terminal's size (80x24 when 0).
	Cols, Rows int
	// Cmd is the command's argv; empty is the user's login shell.
	Cmd []string
	// User, Cwd and Env are as in api.ExecRequest. The server sets TERM to
	// xterm-256color unless Env does.
	User string
	Cwd  string
	Env  map[string]string
	// TimeoutMs kills the command after that long (0: the lease bounds it).
	TimeoutMs int64
	// Attach, when not 0, attaches to that running terminal (a PTY's Pid)
	// instead of starting one: its output kept meanwhile (the last
	// api.PtyOutputKept bytes) comes first. The fields above are not used.
	Attach int
}

// PTY is a command on a pseudo-terminal in a sandbox: Read its output (raw
// terminal bytes), Write its input (keystrokes: byte 3, ^C, interrupts
// it), Resize it, Wait for its exit code. Close lets go of it without
// ending it (OpenPTY with Attach takes it up again); Kill ends it.
//
// It is carried by the routes of background processes: POST .../exec with
// pty, then .../stream, .../stdin and .../resize (the API's WebSocket,
// GET .../pty, carries the same to clients that speak WebSocket). A
// broken output stream is resumed where it broke.
type PTY struct {
	c   *Client
	id  string
	pid int

	out    *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{} // closed when the output has ended

	mu   sync.Mutex // guards code and err, set before done closes
	code int
	err  error

	writeMu sync.Mutex // keeps input in order
}

// ptyResumes bounds how often a broken output stream is resumed in a row.
const ptyResumes = 5

// OpenPTY starts a command on a new terminal in sandbox id (or attaches to
// one, opts.Attach) and returns it with its output flowing.
func (c *Client) OpenPTY(ctx context.Context, id string, opts PTYOptions) (*PTY, error) {
	pid := opts.Attach
	var ended *api.Process
	if pid == 0 {
		size := api.PtySize{Cols: opts.Cols, Rows: opts.Rows}
		if size.Cols == 0 {
			size.Cols = 80
		}
		if size.Rows == 0 {
			size.Rows = 24
		}
		req := api.ExecRequest{
			Cmd: api.Command{Argv: opts.Cmd}, Cwd: opts.Cwd, Env: opts.Env, User: opts.User,
			TimeoutMs: opts.TimeoutMs, Background: true, Pty: &size,
		}
		if len(opts.Cmd) == 0 {
			req.Cmd = api.Command{} // the login shell
		}
		p, err := c.StartProcess(ctx, id, req)
		if err != nil {
			return nil, err
		}
		if p.Pid == 0 {
			ended = p // it could not start: its reason and exit code
		}
		pid = p.Pid
	} else {
		p, err := c.GetProcess(ctx, id, pid)
		if err != nil {
			return nil, err
		}
		if !p.Pty {
			return nil, &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: "process " + strconv.Itoa(pid) + " has no terminal"}
		}
	}
	r, w := io.Pipe()
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &PTY{c: c, id: id, pid: pid, out: r, cancel: cancel, done: make(chan struct{})}
	if ended != nil {
		go func() {
			// As a terminal shows it: its line ends are CRLF.
			_, err := w.Write([]byte(strings.ReplaceAll(ended.Stderr, "\n", "\r\n")))
			t.finish(exitOf(ended), err, w)
		}()
		return t, nil
	}
	go t.follow(fctx, w)
	return t, nil
}

func exitOf(p *api.Process) int {
	if p.ExitCode == nil {
		return -1
	}
	return *p.ExitCode
}

// follow copies the output to w until the process ends, resuming a broken
// stream from the bytes already had.
func (t *PTY) follow(ctx context.Context, w *io.PipeWriter) {
	cw := &ptyCounter{w: w}
	var err error
	for tries := 0; tries <= ptyResumes; tries++ {
		var res *ExecResult
		res, err = t.c.FollowProcess(ctx, t.id, t.pid, FollowOptions{StdoutOffset: cw.n}, ExecOptions{Stdout: cw, Stderr: cw})
		if err == nil {
			t.finish(res.ExitCode, nil, w)
			return
		}
		var te *TransportError
		if ctx.Err() != nil || !errors.As(err, &te) || cw.failed {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(tries+1) * 200 * time.Millisecond):
		}
	}
	if ctx.Err() != nil {
		err = ErrPTYClosed
	}
	t.finish(-1, err, w)
}

// ErrPTYClosed is what Read and Wait return once Close let go of the
// terminal.
var ErrPTYClosed = errors.New("the terminal was closed (it may still run: attach to it again)")

func (t *PTY) finish(code int, err error, w *io.PipeWriter) {
	t.mu.Lock()
	t.code, t.err = code, err
	t.mu.Unlock()
	close(t.done)
	if err != nil {
		w.CloseWithError(err)
	} else {
		w.Close()
	}
}

// ptyCounter counts what it passes on, and whether passing on failed.
type ptyCounter struct {
	w      io.Writer
	n      int64
	failed bool
}

func (c *ptyCounter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	if err != nil {
		c.failed = true
	}
	return n, err
}

// Pid is the terminal's process id, to attach to it again.
func (t *PTY) Pid() int { return t.pid }

// Read reads the terminal's output; io.EOF once the process has ended and
// all of it was read.
func (t *PTY) Read(p []byte) (int, error) { return t.out.Read(p) }

// Write sends p to the terminal as typed input.
func (t *PTY) Write(p []byte) (int, error) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	sent := 0
	for sent < len(p) {
		n := min(len(p)-sent, api.MaxStdinBody)
		if err := t.c.WriteProcessStdin(context.Background(), t.id, t.pid, p[sent:sent+n], false); err != nil {
			return sent, err
		}
		sent += n
	}
	return sent, nil
}

// Resize sets the terminal's size; its foreground process gets SIGWINCH.
func (t *PTY) Resize(ctx context.Context, cols, rows int) error {
	return t.c.ResizeProcess(ctx, t.id, t.pid, cols, rows)
}

// ResizeProcess sets the terminal size of process pid of sandbox id, a
// process started with a terminal (api.ExecRequest.Pty).
func (c *Client) ResizeProcess(ctx context.Context, id string, pid, cols, rows int) error {
	p, err := sandboxPath(id, "/processes/"+strconv.Itoa(pid)+"/resize")
	if err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodPost, p, nil, api.PtySize{Cols: cols, Rows: rows}, nil)
}

// Wait waits until the process has ended and its output was all passed to
// Read, and returns its exit code (128+n for a death by signal n).
func (t *PTY) Wait(ctx context.Context) (int, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.code, t.err
}

// Kill ends the process and everything it started.
func (t *PTY) Kill(ctx context.Context) error {
	if t.pid == 0 {
		return nil
	}
	_, err := t.c.KillProcess(ctx, t.id, t.pid)
	return err
}

// Close lets go of the terminal without ending it.
func (t *PTY) Close() error {
	t.cancel()
	t.out.Close()
	return nil
}
