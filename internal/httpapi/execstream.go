package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// settleWait bounds how long a broken exec stream waits for the sandbox's
// new state: a lease that ends under a command tears the sandbox down
// before its record says so.
const settleWait = 3 * time.Second

// guardExecStream makes sure an exec stream ends with exactly one "exit" or
// "error" event, as the contract promises: when the agent's stream breaks
// (the sandbox was stopped, paused or ran out of lease under the command)
// the client reads an "error" event with the reason's stable code instead
// of a cut connection.
func (s *server) guardExecStream(r *http.Request, c caller, resp *http.Response) {
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		return
	}
	resp.Body = &execGuard{body: resp.Body, reason: func(cause error) error {
		return s.streamBreak(r.Context(), c, r.PathValue("id"), cause)
	}}
}

// streamBreak says why an exec stream broke, once the sandbox's state has
// settled.
func (s *server) streamBreak(ctx context.Context, c caller, id string, cause error) error {
	deadline := time.Now().Add(settleWait)
	for {
		rec, err := s.cfg.Sandboxes.Get(ctx, c.account, id)
		switch {
		case err != nil:
			return sandbox.Wrap(sandbox.KindInternal, cause, "the command's output stream broke")
		case rec.State == sandbox.StateEnded && rec.EndReason == sandbox.EndLeaseEnded:
			return sandbox.Wrap(sandbox.KindLeaseEnded, cause, fmt.Sprintf("sandbox %s ended under the command: its lease ran out", id))
		case rec.State != sandbox.StateRunning:
			msg := fmt.Sprintf("sandbox %s is %s: the command did not finish", id, rec.State)
			if rec.EndReason != "" {
				msg = fmt.Sprintf("sandbox %s ended under the command (%s)", id, rec.EndReason)
			}
			return sandbox.Wrap(sandbox.KindConflict, cause, msg)
		case time.Now().After(deadline), ctx.Err() != nil:
			return sandbox.Wrap(sandbox.KindInternal, cause, "the command's output stream broke")
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// maxExecLine bounds one line of an exec stream. The agent's lines carry
// at most 32 KiB of output each (at most 192 KiB once JSON-escaped); a
// longer one comes from something else answering in the agent's place, and
// ends the stream.
const maxExecLine = 256 << 10

// errLineTooLong ends a stream whose line passed maxExecLine.
var errLineTooLong = sandbox.Errorf(sandbox.KindInternal, "the sandbox's agent sent a line longer than %d bytes: the stream was cut", maxExecLine)

// execGuard passes an ndjson stream through and, when it ends without a
// last "exit" or "error" event, adds an "error" event. What it keeps of a
// line is bounded by maxExecLine: the agent is untrusted input.
type execGuard struct {
	body   io.ReadCloser
	reason func(cause error) error

	last    []byte // the last complete line
	cur     []byte // the line being read
	partial bool   // the stream is inside a line
	tail    *bytes.Reader
}

func (g *execGuard) Read(p []byte) (int, error) {
	if g.tail != nil {
		return g.tail.Read(p)
	}
	n, err := g.body.Read(p)
	if !g.track(p[:n]) {
		g.body.Close()
		g.tail = bytes.NewReader(g.errorEvent(errLineTooLong))
		return n, nil
	}
	if err == nil {
		return n, nil
	}
	if errors.Is(err, io.EOF) && !g.partial && terminal(g.last) {
		return n, io.EOF
	}
	cause := err
	if errors.Is(err, io.EOF) {
		cause = errors.New("exec stream ended without an exit event")
	}
	g.tail = bytes.NewReader(g.errorEvent(g.reason(cause)))
	return n, nil
}

func (g *execGuard) Close() error { return g.body.Close() }

// track follows line boundaries. It reports false when a line is longer
// than maxExecLine.
func (g *execGuard) track(b []byte) bool {
	for len(b) > 0 {
		if !g.partial {
			g.cur = g.cur[:0]
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(g.cur)+len(b) > maxExecLine {
				g.partial = true
				return false
			}
			g.cur = append(g.cur, b...)
			g.partial = true
			return true
		}
		if len(g.cur)+i > maxExecLine {
			g.partial = true
			return false
		}
		g.cur = append(g.cur, b[:i]...)
		g.last = append(g.last[:0], g.cur...)
		g.partial = false
		b = b[i+1:]
	}
	return true
}

// errorEvent is the final event for err, after a newline that ends a cut
// line.
func (g *execGuard) errorEvent(err error) []byte {
	d := ErrorDetail(err)
	line, _ := json.Marshal(api.ExecEvent{Type: api.EventError, Error: &d})
	if g.partial {
		line = append([]byte("\n"), line...)
	}
	return append(line, '\n')
}

// terminal reports whether an ndjson line is an "exit" or "error" event.
func terminal(line []byte) bool {
	var ev struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return false
	}
	return ev.Type == api.EventExit || ev.Type == api.EventError
}
