package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
)

// stallTimeout is how long one event may wait for the client to take it.
// A client that takes nothing for that long is treated as gone: otherwise
// it would hold the command, blocked on a full pipe, forever.
const stallTimeout = 2 * time.Minute

// eventStream writes ExecEvents as NDJSON, one flushed line each.
type eventStream struct {
	mu     sync.Mutex // guards w, enc and failed: lines never interleave
	w      http.ResponseWriter
	rc     *http.ResponseController
	enc    *json.Encoder
	failed bool
	onFail func() // called once, on the first failed write
}

func newEventStream(w http.ResponseWriter, onFail func()) *eventStream {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &eventStream{w: w, rc: http.NewResponseController(w), enc: enc, onFail: onFail}
}

// begin sends the response header and the start event.
func (es *eventStream) begin(pid int) {
	es.w.Header().Set("Content-Type", "application/x-ndjson")
	es.w.Header().Set("Cache-Control", "no-store")
	es.w.WriteHeader(http.StatusOK)
	es.send(api.ExecEvent{Type: api.EventStart, Pid: pid})
}

// send writes ev. Once a write fails, the client is gone: later events are
// dropped.
func (es *eventStream) send(ev api.ExecEvent) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.failed {
		return
	}
	_ = es.rc.SetWriteDeadline(time.Now().Add(stallTimeout))
	err := es.enc.Encode(ev)
	if err == nil {
		err = es.rc.Flush()
	}
	if err != nil {
		es.failed = true
		es.onFail()
	}
}

// detach stops every later write: the handler is about to return, and
// the output goes on only into the command's kept tails.
func (es *eventStream) detach() {
	es.mu.Lock()
	defer es.mu.Unlock()
	es.failed = true
}

// both calls f then g.
func both(f, g func([]byte)) func([]byte) {
	return func(b []byte) {
		f(b)
		g(b)
	}
}

// end clears the write deadline, which would outlive the response on a
// kept-alive connection.
func (es *eventStream) end() {
	es.mu.Lock()
	defer es.mu.Unlock()
	_ = es.rc.SetWriteDeadline(time.Time{})
}

func (es *eventStream) output(typ string) func([]byte) {
	return func(b []byte) { es.send(api.OutputEvent(typ, b)) }
}

func (s *Server) runForeground(w http.ResponseWriter, r *http.Request, l *launch) error {
	// The command dies with the request: when the client goes away or
	// stops taking events.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	es := newEventStream(w, cancel)
	defer es.end()
	begun := time.Now()
	// The output is kept as a background process's is, besides being
	// streamed: a suspend hands the command over to the process table,
	// where the host follows it on from the bytes it has.
	stdout, stderr := newTail(api.OutputCap), newTail(api.OutputCap)
	p, err := s.start(l, es.begin, both(stdout.write, es.output(api.EventStdout)), both(stderr.write, es.output(api.EventStderr)))
	var nr *notRunnable
	if errors.As(err, &nr) {
		es.begin(0)
		es.send(api.OutputEvent(api.EventStderr, []byte(nr.msg)))
		es.send(exitEvent(nr.code, false, begun))
		return nil
	}
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, p.kill)
	select {
	case <-p.done:
		stop()
	case <-s.suspend.wait():
		if stop() {
			// The link is going (a pause, a snapshot): the command goes
			// on, kept in the table, and this stream ends without its
			// exit event, so the host knows to follow it again.
			es.detach()
			p.stdout, p.stderr = stdout, stderr
			s.procs.add(p)
			return nil
		}
		<-p.done // the request had ended already: the kill ran
	}
	info := p.info()
	es.send(exitEvent(*info.ExitCode, info.TimedOut, begun))
	return nil
}

func exitEvent(code int, timedOut bool, begun time.Time) api.ExecEvent {
	return api.ExecEvent{
		Type:       api.EventExit,
		ExitCode:   &code,
		TimedOut:   timedOut,
		DurationMs: time.Since(begun).Milliseconds(),
	}
}
