package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/withruntime/withruntime/api"
)

// OutputCap bounds how much of each stream ExecResult keeps.
const OutputCap = 16 << 20

// ExecOptions says where an exec's output goes as it is produced.
type ExecOptions struct {
	// Stdout and Stderr receive each chunk of output as it arrives, in the
	// order the command produced it, byte for byte (output that is not
	// UTF-8 included). A nil writer leaves that stream in ExecResult
	// instead.
	Stdout io.Writer
	Stderr io.Writer
}

// ExecResult is how a command ended.
type ExecResult struct {
	Pid      int
	ExitCode int  // -1 when the server reported none
	TimedOut bool // the command's own timeout (timeout_ms) killed it
	// Stdout and Stderr hold the output of streams that had no writer in
	// ExecOptions: the last OutputCap bytes of each, exactly as the command
	// wrote them (a Go string holds any bytes, UTF-8 or not); *Truncated
	// says older output was dropped.
	Stdout          string
	Stderr          string
	StdoutTruncated bool
	StderrTruncated bool
	Duration        time.Duration
}

// errStreamEnded is the cause of a TransportError for an exec stream that
// ended before its "exit" event.
var errStreamEnded = errors.New("exec stream ended before its exit event")

// Exec runs a command in sandbox id and waits for it to end, streaming its
// output into opts' writers as it is produced. A non-zero exit is a result,
// not an error. An "error" event from the server is an *APIError; a stream
// that breaks before the command's exit is a *TransportError (the command
// may still be running: its sandbox's lease bounds it).
func (c *Client) Exec(ctx context.Context, id string, req api.ExecRequest, opts ExecOptions) (*ExecResult, error) {
	p, err := sandboxPath(id, "/exec")
	if err != nil {
		return nil, err
	}
	req.Background = false
	r, err := streamPost(p, req)
	if err != nil {
		return nil, err
	}
	return c.execStream(ctx, r, opts)
}

// streamPost is a POST of in, as JSON, to path, whose answer is an NDJSON
// event stream.
func streamPost(path string, in any) (request, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return request{}, fmt.Errorf("encoding request: %w", err)
	}
	return request{
		method:      http.MethodPost,
		path:        path,
		body:        bytes.NewReader(body),
		contentType: "application/json",
		accept:      "application/x-ndjson",
	}, nil
}

// execStream sends r, whose answer is an exec stream, and reads that
// stream to its end.
func (c *Client) execStream(ctx context.Context, r request, opts ExecOptions) (*ExecResult, error) {
	op := r.op(c.baseURL)
	start := time.Now()
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()

	res := &ExecResult{ExitCode: -1}
	var stdout, stderr tailBuffer
	dec := newEventDecoder(resp.Body, maxExecLine)
	for {
		var ev api.ExecEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = errStreamEnded
			}
			return nil, transportError(ctx, op, err)
		}
		switch ev.Type {
		case api.EventStart:
			res.Pid = ev.Pid
		case api.EventStdout, api.EventStderr:
			data, err := ev.Output()
			if err != nil {
				return nil, transportError(ctx, op, err)
			}
			w, buf := opts.Stdout, &stdout
			if ev.Type == api.EventStderr {
				w, buf = opts.Stderr, &stderr
			}
			if err := emit(w, buf, data); err != nil {
				return nil, fmt.Errorf("writing %s: %w", ev.Type, err)
			}
		case api.EventError:
			return nil, apiErrorFromEvent(ev.Error)
		case api.EventExit:
			if ev.ExitCode != nil {
				res.ExitCode = *ev.ExitCode
			}
			res.TimedOut = ev.TimedOut
			res.Duration = time.Duration(ev.DurationMs) * time.Millisecond
			if ev.DurationMs == 0 {
				res.Duration = time.Since(start)
			}
			res.Stdout, res.StdoutTruncated = stdout.String()
			res.Stderr, res.StderrTruncated = stderr.String()
			// Read what little may follow, so the connection can be reused.
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			return res, nil
		}
		// Event types this client does not know are skipped: the server may
		// add some.
	}
}

func emit(w io.Writer, buf *tailBuffer, data string) error {
	if w == nil {
		buf.WriteString(data)
		return nil
	}
	_, err := io.WriteString(w, data)
	return err
}

// tailBuffer keeps the last OutputCap bytes written to it.
type tailBuffer struct {
	b         []byte
	truncated bool
}

func (t *tailBuffer) WriteString(s string) {
	t.b = append(t.b, s...)
	// Trim only past twice the cap, so trimming costs amortized O(1) a byte.
	if len(t.b) > 2*OutputCap {
		t.b = append([]byte(nil), t.b[len(t.b)-OutputCap:]...)
		t.truncated = true
	}
}

// String returns what is kept, never starting inside a UTF-8 sequence.
func (t *tailBuffer) String() (string, bool) {
	b, truncated := t.b, t.truncated
	if len(b) > OutputCap {
		b, truncated = b[len(b)-OutputCap:], true
	}
	if truncated {
		for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
			if utf8.RuneStart(b[i]) {
				b = b[i:]
				break
			}
		}
	}
	return string(b), truncated
}

// StartProcess starts a command in the background in sandbox id and returns
// at once. The process lives until it exits, is killed, or the lease ends.
func (c *Client) StartProcess(ctx context.Context, id string, req api.ExecRequest) (*api.Process, error) {
	p, err := sandboxPath(id, "/exec")
	if err != nil {
		return nil, err
	}
	req.Background = true
	var proc api.Process
	if err := c.doJSON(ctx, http.MethodPost, p, nil, req, &proc); err != nil {
		return nil, err
	}
	if err := c.exactOutput(ctx, http.MethodPost, p, &proc); err != nil {
		return nil, err
	}
	return &proc, nil
}

// GetProcess returns background process pid of sandbox id, with its output
// so far.
func (c *Client) GetProcess(ctx context.Context, id string, pid int) (*api.Process, error) {
	return c.processCall(ctx, http.MethodGet, id, pid, "", nil)
}

// waitPoll is how long one long poll of WaitProcess asks the server to
// hold: under the idle timeout of common proxies.
const waitPoll = 30 * time.Second

// WaitProcess waits for background process pid of sandbox id to end and
// returns it. It long-polls the server until then, or until ctx ends.
func (c *Client) WaitProcess(ctx context.Context, id string, pid int) (*api.Process, error) {
	q := url.Values{"wait": {"true"}, "timeout_ms": {strconv.FormatInt(waitPoll.Milliseconds(), 10)}}
	for {
		start := time.Now()
		proc, err := c.processCall(ctx, http.MethodGet, id, pid, "", q)
		if err != nil {
			return nil, err
		}
		if !proc.Running {
			return proc, nil
		}
		// A server that answers at once despite wait=true must not make
		// this loop spin.
		if time.Since(start) < time.Second {
			t := time.NewTimer(500 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
	}
}

// FollowOptions says where FollowProcess starts in each output stream:
// byte offsets from the stream's first byte. Output older than the last
// api.OutputCap bytes is no longer kept and is skipped.
type FollowOptions struct {
	StdoutOffset int64
	StderrOffset int64
}

// FollowProcess streams the output of background process pid of sandbox
// id, from the offsets in from, into opts' writers as it is produced, and
// returns once the process has ended, as Exec does. Leaving (ctx ending)
// does not touch the process: to resume after a break without a repeat,
// pass the number of bytes already received of each stream.
func (c *Client) FollowProcess(ctx context.Context, id string, pid int, from FollowOptions, opts ExecOptions) (*ExecResult, error) {
	p, err := sandboxPath(id, "/processes/"+strconv.Itoa(pid)+"/stream")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if from.StdoutOffset > 0 {
		q.Set("stdout_offset", strconv.FormatInt(from.StdoutOffset, 10))
	}
	if from.StderrOffset > 0 {
		q.Set("stderr_offset", strconv.FormatInt(from.StderrOffset, 10))
	}
	return c.execStream(ctx, request{method: http.MethodGet, path: p, query: q, accept: "application/x-ndjson"}, opts)
}

// WriteProcessStdin writes data to the stdin of background process pid of
// sandbox id, started with KeepStdin; with closeStdin it then closes it.
// One call sends at most api.MaxStdinBody bytes.
func (c *Client) WriteProcessStdin(ctx context.Context, id string, pid int, data []byte, closeStdin bool) error {
	p, err := sandboxPath(id, "/processes/"+strconv.Itoa(pid)+"/stdin")
	if err != nil {
		return err
	}
	var q url.Values
	if closeStdin {
		q = url.Values{"close": {"true"}}
	}
	r := request{method: http.MethodPost, path: p, query: q, body: bytes.NewReader(data), contentType: "application/octet-stream"}
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return nil
}

// KillProcess kills background process pid of sandbox id and returns it.
func (c *Client) KillProcess(ctx context.Context, id string, pid int) (*api.Process, error) {
	return c.processCall(ctx, http.MethodPost, id, pid, "/kill", nil)
}

// ListProcesses returns the background processes of sandbox id, each with
// the output it kept.
func (c *Client) ListProcesses(ctx context.Context, id string) ([]api.Process, error) {
	return c.ListProcessesWith(ctx, id, ListProcessesOptions{})
}

// ListProcessesOptions shape a listing of background processes.
type ListProcessesOptions struct {
	// NoOutput leaves every process's output out (Stdout and Stderr are
	// empty): a listing of many processes then stays small. GetProcess
	// returns one process's output.
	NoOutput bool
	// Running lists only the processes still running.
	Running bool
}

// ListProcessesWith returns the background processes of sandbox id as opts
// ask.
func (c *Client) ListProcessesWith(ctx context.Context, id string, opts ListProcessesOptions) ([]api.Process, error) {
	p, err := sandboxPath(id, "/processes")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if opts.NoOutput {
		q.Set("output", "false")
	}
	if opts.Running {
		q.Set("running", "true")
	}
	var l api.ProcessList
	if err := c.doJSON(ctx, http.MethodGet, p, q, nil, &l); err != nil {
		return nil, err
	}
	for i := range l.Processes {
		if err := c.exactOutput(ctx, http.MethodGet, p, &l.Processes[i]); err != nil {
			return nil, err
		}
	}
	return l.Processes, nil
}

func (c *Client) processCall(ctx context.Context, method, id string, pid int, suffix string, q url.Values) (*api.Process, error) {
	p, err := sandboxPath(id, "/processes/"+strconv.Itoa(pid)+suffix)
	if err != nil {
		return nil, err
	}
	var proc api.Process
	if err := c.doJSON(ctx, method, p, q, nil, &proc); err != nil {
		return nil, err
	}
	if err := c.exactOutput(ctx, method, p, &proc); err != nil {
		return nil, err
	}
	return &proc, nil
}

// exactOutput turns proc's output into its exact bytes; a server that sends
// broken base64 is answering in a way no client can read.
func (c *Client) exactOutput(ctx context.Context, method, path string, proc *api.Process) error {
	if err := proc.ExactOutput(); err != nil {
		return transportError(ctx, request{method: method, path: path}.op(c.baseURL), err)
	}
	return nil
}
