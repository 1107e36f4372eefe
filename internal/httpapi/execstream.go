package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// settleWait bounds how long a broken stream waits for the sandbox's new
// state: a lease that ends under a command tears the sandbox down before
// its record says so.
const settleWait = 3 * time.Second

// streamKind describes one kind of ndjson stream the agent answers with,
// for its guard.
type streamKind struct {
	what     string   // what runs while the stream lasts: "command", "cell"
	end      string   // the event that ends it well: "exit", "end"
	terminal []string // the event types that may end it, end among them
	// maxLine bounds one line: the agent's lines have bounds of their own
	// and a longer one comes from something else answering in the agent's
	// place, which ends the stream.
	maxLine int
}

var (
	// execStream: an exec stream's lines carry at most 32 KiB of output
	// each (at most 192 KiB once JSON-escaped).
	execStream = streamKind{what: "command", end: api.EventExit, terminal: []string{api.EventExit, api.EventError}, maxLine: 256 << 10}
	// codeStream: a code stream's results carry fields of up to 4 MiB each.
	codeStream = streamKind{what: "cell", end: api.CodeEventEnd, terminal: []string{api.CodeEventEnd, api.CodeEventError}, maxLine: 8 << 20}
)

// followStream: a background process's follow stream has the lines of an
// exec stream.
var followStream = streamKind{what: "process", end: api.EventExit, terminal: execStream.terminal, maxLine: execStream.maxLine}

// guardedStreams are the agent's routes whose streams are guarded.
var guardedStreams = map[string]streamKind{"/exec": execStream, "/code": codeStream}

// guardedStream is the kind of agentPath's stream, if it is guarded.
func guardedStream(agentPath string) (streamKind, bool) {
	if strings.HasPrefix(agentPath, "/processes/") && strings.HasSuffix(agentPath, "/stream") {
		return followStream, true
	}
	k, ok := guardedStreams[agentPath]
	return k, ok
}

// guardStream makes sure a stream of kind k ends with exactly one of its
// terminal events, as the contract promises: when the agent's stream
// breaks (the sandbox was stopped, paused or ran out of lease under the
// command or cell) the client reads an "error" event with the reason's
// stable code instead of a cut connection.
func (s *server) guardStream(r *http.Request, c caller, resp *http.Response, k streamKind) {
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		return
	}
	resp.Body = &streamGuard{kind: k, body: resp.Body, reason: func(cause error) error {
		return s.streamBreak(r.Context(), c, r.PathValue("id"), k.what, cause)
	}}
}

// streamBreak says why a stream broke under what ran, once the sandbox's
// state has settled.
func (s *server) streamBreak(ctx context.Context, c caller, id, what string, cause error) error {
	broke := fmt.Sprintf("the %s's output stream broke", what)
	deadline := time.Now().Add(settleWait)
	for {
		rec, err := s.cfg.Sandboxes.Get(ctx, c.account, id)
		switch {
		case err != nil:
			return sandbox.Wrap(sandbox.KindInternal, cause, broke)
		case rec.State == sandbox.StateEnded && rec.EndReason == sandbox.EndLeaseEnded:
			return sandbox.Wrap(sandbox.KindLeaseEnded, cause, fmt.Sprintf("sandbox %s ended under the %s: its lease ran out", id, what))
		case rec.State != sandbox.StateRunning:
			msg := fmt.Sprintf("sandbox %s is %s: the %s did not finish", id, rec.State, what)
			if rec.EndReason != "" {
				msg = fmt.Sprintf("sandbox %s ended under the %s (%s)", id, what, rec.EndReason)
			}
			return sandbox.Wrap(sandbox.KindConflict, cause, msg)
		case time.Now().After(deadline), ctx.Err() != nil:
			return sandbox.Wrap(sandbox.KindInternal, cause, broke)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// maxTerminalLine bounds what the guard keeps of a line: terminal events
// are small (a type, an exit code, an error detail), so a longer line is
// not one, and a stream of long results costs no copy of each.
const maxTerminalLine = 64 << 10

// streamGuard passes an ndjson stream through and, when it ends without a
// last terminal event, adds an "error" event. It cuts the stream at a line
// longer than its kind's maxLine: the agent is untrusted input.
type streamGuard struct {
	kind   streamKind
	body   io.ReadCloser
	reason func(cause error) error

	last    []byte // the last complete line, if it was short enough to keep
	cur     []byte // what is kept of the line being read
	curLen  int    // the length of the line being read
	partial bool   // the stream is inside a line
	tail    *bytes.Reader
}

func (g *streamGuard) Read(p []byte) (int, error) {
	if g.tail != nil {
		return g.tail.Read(p)
	}
	n, err := g.body.Read(p)
	if !g.track(p[:n]) {
		g.body.Close()
		g.tail = bytes.NewReader(g.errorEvent(sandbox.Errorf(sandbox.KindInternal,
			"the sandbox's agent sent a line longer than %d bytes: the stream was cut", g.kind.maxLine)))
		return n, nil
	}
	if err == nil {
		return n, nil
	}
	if errors.Is(err, io.EOF) && !g.partial && g.terminal(g.last) {
		return n, io.EOF
	}
	cause := err
	if errors.Is(err, io.EOF) {
		cause = fmt.Errorf("the stream ended without an %s event", g.kind.end)
	}
	g.tail = bytes.NewReader(g.errorEvent(g.reason(cause)))
	return n, nil
}

func (g *streamGuard) Close() error { return g.body.Close() }

// track follows line boundaries. It reports false when a line is longer
// than the kind's maxLine.
func (g *streamGuard) track(b []byte) bool {
	for len(b) > 0 {
		if !g.partial {
			g.cur, g.curLen = g.cur[:0], 0
		}
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		g.partial = true
		if g.curLen+len(seg) > g.kind.maxLine {
			return false
		}
		g.curLen += len(seg)
		if keep := maxTerminalLine - len(g.cur); keep > 0 {
			g.cur = append(g.cur, seg[:min(keep, len(seg))]...)
		}
		if i < 0 {
			return true
		}
		g.last = g.last[:0]
		if g.curLen <= maxTerminalLine {
			g.last = append(g.last, g.cur...)
		}
		g.partial = false
		b = b[i+1:]
	}
	return true
}

// errorEvent is the final event for err, after a newline that ends a cut
// line. Exec and code streams share the shape of their "error" event.
func (g *streamGuard) errorEvent(err error) []byte {
	d := ErrorDetail(err)
	line, _ := json.Marshal(api.ExecEvent{Type: api.EventError, Error: &d})
	if g.partial {
		line = append([]byte("\n"), line...)
	}
	return append(line, '\n')
}

// terminal reports whether an ndjson line is one of the kind's terminal
// events.
func (g *streamGuard) terminal(line []byte) bool {
	var ev struct {
		Type string `json:"type"`
	}
	if len(line) == 0 || json.Unmarshal(line, &ev) != nil {
		return false
	}
	return slices.Contains(g.kind.terminal, ev.Type)
}
