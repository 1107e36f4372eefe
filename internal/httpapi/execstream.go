package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/membudget"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
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
// stable code instead of a cut connection. A 200 that is not an ndjson
// stream is the agent failing: it would pass unguarded.
func (s *server) guardStream(r *http.Request, c caller, resp *http.Response, k streamKind) {
	if resp.StatusCode != http.StatusOK {
		return
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/x-ndjson" {
		resp.Body.Close()
		err := sandbox.Errorf(sandbox.KindInternal, "the sandbox's agent answered the %s with %.60q, not an event stream", k.what, resp.Header.Get("Content-Type"))
		if info := infoFrom(r.Context()); info != nil {
			info.err = err
		}
		body, _ := json.Marshal(api.ErrorBody{Error: ErrorDetail(err)}) // strings only: cannot fail
		body = append(body, '\n')
		resp.StatusCode = service.Status(sandbox.KindInternal)
		resp.Status = fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		clear(resp.Header)
		resp.Header.Set("Content-Type", "application/json")
		resp.Header.Set("X-Content-Type-Options", "nosniff")
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		resp.ContentLength = int64(len(body))
		resp.TransferEncoding = nil
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return
	}
	g := &streamGuard{kind: k, body: resp.Body, reason: func(cause error) error {
		return s.streamBreak(r.Context(), c, r.PathValue("id"), k.what, cause)
	}, hold: s.cfg.AgentMemory.Hold(c.account, r.PathValue("id"))}
	if k.what == execStream.what {
		// A foreground command outlives a suspend of the link: its stream
		// is followed on (execresume.go).
		g.progress = &execProgress{}
		g.followOn = func(p *execProgress) (io.ReadCloser, error) {
			return s.followOn(r.Context(), c, r.PathValue("id"), p)
		}
	}
	resp.Body = g
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

// maxTerminalLine bounds what the guard keeps of the last line: terminal
// events are small (a type, an exit code, an error detail), so a longer
// line is not one.
const maxTerminalLine = 64 << 10

// keepBuffer is the most buffer the guard keeps between lines: a stream of
// one long result does not hold its memory for the stream's life.
const keepBuffer = 1 << 20

// streamGuard passes an ndjson stream through a line at a time and, when
// it ends without a last terminal event, adds an "error" event. A line is
// held back until it ends: a line that is too long (over its kind's
// maxLine) or not a JSON object cuts the stream there, and the client,
// which parses lines, reads the error event instead of a broken line. The
// agent is untrusted input.
type streamGuard struct {
	kind   streamKind
	body   io.ReadCloser
	reason func(cause error) error

	line  []byte // the line being read, held back
	ready []byte // complete lines the client has yet to read, from off
	off   int
	last  []byte // the last complete line, if it was short enough to keep
	ended bool   // the agent's stream ended well: io.EOF once ready is read
	tail  *bytes.Reader
	// hold reserves the buffers above in the server's budget of agents'
	// answers (agentmemory.go) before they grow; nil reserves nothing.
	hold *membudget.Hold
	// progress and followOn, set for exec streams, follow the command on
	// when the stream breaks under it (execresume.go).
	progress *execProgress
	followOn func(*execProgress) (io.ReadCloser, error)
}

func (g *streamGuard) Read(p []byte) (int, error) {
	defer g.settle()
	for {
		if g.off < len(g.ready) {
			n := copy(p, g.ready[g.off:])
			g.off += n
			if g.off == len(g.ready) {
				g.ready, g.off = g.ready[:0], 0
				if cap(g.ready) > keepBuffer {
					g.ready = nil
				}
			}
			return n, nil
		}
		switch {
		case g.tail != nil:
			return g.tail.Read(p)
		case g.ended:
			return 0, io.EOF
		case len(p) == 0:
			return 0, nil
		}
		n, err := g.body.Read(p)
		if bad := g.take(p[:n]); bad != nil {
			g.body.Close()
			g.line = nil
			g.tail = bytes.NewReader(g.errorEvent(bad))
			continue
		}
		if err == nil {
			continue
		}
		// After a whole terminal line the stream is over, however the
		// connection then ends: a second terminal event would break the
		// contract.
		if len(g.line) == 0 && g.terminal(g.last) {
			g.ended = true
			continue
		}
		cause := err
		if errors.Is(err, io.EOF) {
			cause = fmt.Errorf("the stream ended without an %s event", g.kind.end)
		}
		g.line = nil // a cut line is never passed on
		if g.followOn != nil {
			if body, ferr := g.followOn(g.progress); ferr == nil {
				g.body.Close()
				g.body = body
				continue
			}
		}
		g.tail = bytes.NewReader(g.errorEvent(g.reason(cause)))
	}
}

func (g *streamGuard) Close() error {
	g.hold.Release()
	return g.body.Close()
}

// held is what the guard's buffers hold.
func (g *streamGuard) held() int64 { return int64(cap(g.line) + cap(g.ready) + cap(g.last)) }

// settle makes the reservation what the buffers hold now.
func (g *streamGuard) settle() {
	if g.hold != nil {
		g.hold.Resize(g.held()) // shrinking, or as before: never refused
	}
}

// reserveGrowth reserves, before buf grows to n bytes, the guard's buffers
// and the grown one beside the old (append doubles, at most).
func (g *streamGuard) reserveGrowth(buf []byte, n int) error {
	if g.hold == nil || n <= cap(buf) {
		return nil
	}
	if err := g.hold.Resize(g.held() + int64(max(n, 2*cap(buf)))); err != nil {
		return budgetError(err)
	}
	return nil
}

// take adds b to the stream, moving each line it completes to ready. It
// returns why the stream must be cut: a line too long, or not an event.
func (g *streamGuard) take(b []byte) error {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if len(g.line)+len(seg) > g.kind.maxLine {
			return sandbox.Errorf(sandbox.KindInternal, "the sandbox's agent sent a line longer than %d bytes: the stream was cut", g.kind.maxLine)
		}
		if err := g.reserveGrowth(g.line, len(g.line)+len(seg)); err != nil {
			return err
		}
		g.line = append(g.line, seg...)
		if i < 0 {
			return nil
		}
		if t := bytes.TrimSpace(g.line); len(t) > 0 && (t[0] != '{' || !json.Valid(t)) {
			return sandbox.Errorf(sandbox.KindInternal, "the sandbox's agent sent a line that is not an event: the stream was cut")
		}
		g.last = g.last[:0]
		if len(g.line) <= maxTerminalLine {
			g.last = append(g.last, g.line...)
		}
		if g.progress != nil && !g.progress.see(g.line) {
			g.line = g.line[:0]
			b = b[i+1:]
			continue
		}
		if err := g.reserveGrowth(g.ready, len(g.ready)+len(g.line)+1); err != nil {
			return err
		}
		g.ready = append(append(g.ready, g.line...), '\n')
		g.line = g.line[:0]
		if cap(g.line) > keepBuffer {
			g.line = nil
		}
		b = b[i+1:]
	}
	return nil
}

// errorEvent is the final event for err. Exec and code streams share the
// shape of their "error" event.
func (g *streamGuard) errorEvent(err error) []byte {
	d := ErrorDetail(err)
	line, _ := json.Marshal(api.ExecEvent{Type: api.EventError, Error: &d})
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
