package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/withruntime/withruntime/api"
)

const (
	// kernelStart bounds how long a cell waits for its kernel to answer:
	// in gVisor the first start takes seconds.
	kernelStart = 150 * time.Second
	// interruptGrace is how long an interrupted kernel may take to stop
	// before it is restarted.
	interruptGrace = 3 * time.Second

	maxEventText  = 32 << 10
	maxResultItem = 4 << 20
	// maxResultLine keeps a result's line under the server's 8 MiB guard.
	maxResultLine = 7 << 20
	maxExcName    = 1 << 10
	maxExcValue   = 256 << 10
	maxTraceback  = 512 << 10

	deadKernel = "DeadKernelError"
)

// runCell runs req.Code in cx; it holds cx's turn.
func (s *Server) runCell(w http.ResponseWriter, r *http.Request, cx *codeContext, req api.CodeRequest) error {
	d, err := s.driverOf(cx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if err := waitReady(ctx, cx, d); err != nil || ctx.Err() != nil {
		return err
	}
	cs := newCodeStream(w, cancel)
	defer cs.end()
	cs.begin()
	// Events left over from a cell that ended badly are dropped; events
	// that ended (the driver died, or a restart killed it, since its last
	// cell) mean the state is gone.
	if !d.alive() || !drainEvents(d) {
		s.replaceDriver(cx, d)
		cs.send(deadEvent("the kernel had died and was restarted before the cell ran: the context's state was lost; the cell did not run"))
		cs.send(api.CodeEvent{Type: api.CodeEventEnd})
		return nil
	}
	c := &cell{s: s, cx: cx, d: d, cs: cs, id: d.nextID.Add(1), timeoutMs: req.TimeoutMs}
	if !d.send(driverOp{Op: "execute", ID: c.id, Code: req.Code}) {
		cx.dropDriver(d)
		cs.send(errorEvent("the code interpreter does not take input; it is restarted on next use"))
		return nil
	}
	c.loop(ctx)
	return nil
}

// drainEvents drops the events waiting in d; false when they ended.
func drainEvents(d *driver) bool {
	for {
		select {
		case _, ok := <-d.events:
			if !ok {
				return false
			}
		default:
			return true
		}
	}
}

// waitReady waits until d's kernel answers. A driver that fails first is
// dropped (the next cell starts another) and the error says why.
func waitReady(ctx context.Context, cx *codeContext, d *driver) error {
	if d.readyOK.Load() {
		return nil
	}
	timer := time.NewTimer(kernelStart)
	defer timer.Stop()
	var why string
	select {
	case <-d.ready:
		return nil
	case <-ctx.Done():
		return nil // the driver keeps starting for the next cell
	case <-timer.C:
		why = fmt.Sprintf("the kernel did not start within %s", kernelStart)
	case ev, ok := <-d.events:
		if !ok {
			why, _ = d.reason()
		} else if ev.Type == "fatal" {
			why = ev.Message
		} else {
			why = fmt.Sprintf("the driver sent %.40q before it was ready", ev.Type)
		}
	}
	cx.dropDriver(d)
	if e := d.lastStderr(); e != "" && e != why {
		why += " (" + e + ")"
	}
	return fmt.Errorf("the code interpreter did not start: %s", why)
}

// cell is one cell running.
type cell struct {
	s         *Server
	cx        *codeContext
	d         *driver
	cs        *codeStream
	id        int64
	timeoutMs int64

	interrupted bool
	timedOut    bool
	toldTimeout bool
	escalate    <-chan time.Time
}

// loop passes the driver's events on until the cell ends.
func (c *cell) loop(ctx context.Context) {
	var timeout <-chan time.Time
	if c.timeoutMs > 0 {
		t := time.NewTimer(millis(c.timeoutMs))
		defer t.Stop()
		timeout = t.C
	}
	gone := ctx.Done()
	for {
		select {
		case ev, ok := <-c.d.events:
			if !ok {
				c.driverGone()
				return
			}
			if c.event(ev) {
				return
			}
		case <-timeout:
			c.timedOut = true
			c.interrupt()
		case <-gone:
			gone = nil // the client left: stop the cell, tell no one
			c.interrupt()
		case <-c.escalate:
			// The kernel ignores the interrupt: a new one, state lost.
			c.s.replaceDriver(c.cx, c.d)
			if c.timedOut && !c.toldTimeout {
				c.cs.send(c.timeoutEvent("", false))
			}
			c.cs.send(api.CodeEvent{Type: api.CodeEventEnd})
			return
		}
	}
}

func (c *cell) interrupt() {
	if c.interrupted {
		return
	}
	c.interrupted = true
	c.d.send(driverOp{Op: "interrupt", ID: c.id})
	c.escalate = time.After(interruptGrace)
}

// event passes on one event; true when it ended the cell.
func (c *cell) event(ev driverEvent) bool {
	switch ev.Type {
	case api.CodeEventStdout, api.CodeEventStderr:
		for _, part := range splitText(ev.Text, maxEventText) {
			c.cs.send(api.CodeEvent{Type: ev.Type, Text: part})
		}
	case api.CodeEventResult:
		if ev.Result != nil {
			c.cs.send(api.CodeEvent{Type: ev.Type, Result: boundResult(*ev.Result)})
		}
	case api.CodeEventException:
		if ev.Exception == nil {
			break
		}
		x := boundException(*ev.Exception)
		if c.interrupted {
			// The kernel honoured the interrupt: what is left (post-execute
			// hooks, the reply) is no reason to kill it.
			c.escalate = nil
		}
		switch {
		case c.timedOut && !c.toldTimeout:
			// The interrupt's KeyboardInterrupt, shown as what caused it.
			c.cs.send(c.timeoutEvent(x.Traceback, true))
		case c.interrupted:
		default:
			c.cs.send(api.CodeEvent{Type: ev.Type, Exception: &x})
		}
	case api.CodeEventEnd:
		if c.timedOut && !c.toldTimeout {
			c.cs.send(c.timeoutEvent("", true))
		}
		c.cs.send(api.CodeEvent{Type: api.CodeEventEnd, ExecutionCount: max(ev.ExecutionCount, 0)})
		return true
	case "dead":
		c.s.replaceDriver(c.cx, c.d)
		c.cs.send(deadEvent("the kernel died and was restarted: the context's state was lost"))
		c.cs.send(api.CodeEvent{Type: api.CodeEventEnd})
		return true
	default:
		c.cx.dropDriver(c.d)
		c.cs.send(errorEvent(fmt.Sprintf("the code interpreter sent an unknown event %.40q; it is restarted on next use", ev.Type)))
		return true
	}
	return false
}

// driverGone ends the cell whose driver stopped: killed on purpose (a
// restart, a removal), that is the kernel's death; else the platform failed.
func (c *cell) driverGone() {
	why, onPurpose := c.d.reason()
	if onPurpose {
		c.cs.send(deadEvent(why))
		c.cs.send(api.CodeEvent{Type: api.CodeEventEnd})
		return
	}
	c.cx.dropDriver(c.d)
	if e := c.d.lastStderr(); e != "" {
		why += " (" + e + ")"
	}
	c.cs.send(errorEvent("the code interpreter failed: " + why + "; it is restarted on next use"))
}

func (c *cell) timeoutEvent(traceback string, kept bool) api.CodeEvent {
	c.toldTimeout = true
	v := fmt.Sprintf("the cell ran longer than timeout_ms=%d and was interrupted; the context keeps its state", c.timeoutMs)
	if !kept {
		v = fmt.Sprintf("the cell ran longer than timeout_ms=%d and ignored the interrupt for %s: the kernel was restarted and the context's state was lost", c.timeoutMs, interruptGrace)
	}
	return api.CodeEvent{Type: api.CodeEventException, Exception: &api.CodeException{Name: "TimeoutError", Value: v, Traceback: traceback}}
}

// replaceDriver replaces d (its kernel died or will not stop) with a new
// driver, unless that happened already: a restart raced it.
func (s *Server) replaceDriver(cx *codeContext, d *driver) {
	cx.mu.Lock()
	current := cx.drv == d
	cx.mu.Unlock()
	if current {
		_ = s.restart(cx, "")
	}
}

func deadEvent(value string) api.CodeEvent {
	return api.CodeEvent{Type: api.CodeEventException, Exception: &api.CodeException{Name: deadKernel, Value: value}}
}

func errorEvent(msg string) api.CodeEvent {
	return api.CodeEvent{Type: api.CodeEventError, Error: &api.ErrorDetail{Code: codeInternal, Message: msg}}
}

// splitText cuts s into parts of at most n bytes, never inside a UTF-8
// sequence.
func splitText(s string, n int) []string {
	if len(s) <= n {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	var parts []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		parts = append(parts, s[:cut])
		s = s[cut:]
	}
	return append(parts, s)
}

// boundResult drops every field over maxResultItem, then the largest
// fields until the line fits maxResultLine; Text then says how much went.
func boundResult(r api.CodeResult) *api.CodeResult {
	fields := []*string{&r.Text, &r.HTML, &r.Markdown, &r.SVG, &r.PNG, &r.JPEG, &r.LaTeX, &r.JavaScript}
	dropped := 0
	for _, f := range fields {
		if len(*f) > maxResultItem {
			dropped += len(*f)
			*f = ""
		}
	}
	if len(r.JSON) > maxResultItem {
		dropped += len(r.JSON)
		r.JSON = nil
	}
	for encodedLen(r) > maxResultLine {
		var big *string
		for _, f := range fields {
			if big == nil || len(*f) > len(*big) {
				big = f
			}
		}
		if len(*big) == 0 && len(r.JSON) == 0 {
			break
		}
		if len(r.JSON) > len(*big) {
			dropped += len(r.JSON)
			r.JSON = nil
			continue
		}
		dropped += len(*big)
		*big = ""
	}
	if dropped > 0 {
		r.Text = fmt.Sprintf("[result of %d bytes omitted: larger than 4 MiB]", dropped)
	}
	return &r
}

func encodedLen(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

func boundException(x api.CodeException) api.CodeException {
	x.Name = clipHead(x.Name, maxExcName)
	x.Value = clipHead(x.Value, maxExcValue)
	if len(x.Traceback) > maxTraceback {
		// The end of a traceback is where it failed.
		t := x.Traceback[len(x.Traceback)-maxTraceback:]
		for len(t) > 0 && !utf8.RuneStart(t[0]) {
			t = t[1:]
		}
		x.Traceback = "..." + t
	}
	return x
}

func clipHead(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// codeStream writes CodeEvents as NDJSON, one flushed line each.
type codeStream struct {
	mu     sync.Mutex // guards enc and failed
	w      http.ResponseWriter
	rc     *http.ResponseController
	enc    *json.Encoder
	failed bool
	onFail func()
}

func newCodeStream(w http.ResponseWriter, onFail func()) *codeStream {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &codeStream{w: w, rc: http.NewResponseController(w), enc: enc, onFail: onFail}
}

func (cs *codeStream) begin() {
	cs.w.Header().Set("Content-Type", "application/x-ndjson")
	cs.w.Header().Set("Cache-Control", "no-store")
	cs.w.WriteHeader(http.StatusOK)
	_ = cs.rc.Flush()
}

// send writes ev; once a write fails the client is gone and later events
// are dropped. A client that takes nothing for stallTimeout is gone too.
func (cs *codeStream) send(ev api.CodeEvent) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.failed {
		return
	}
	_ = cs.rc.SetWriteDeadline(time.Now().Add(stallTimeout))
	err := cs.enc.Encode(ev)
	if err == nil {
		err = cs.rc.Flush()
	}
	if err != nil {
		cs.failed = true
		cs.onFail()
	}
}

func (cs *codeStream) end() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	_ = cs.rc.SetWriteDeadline(time.Time{})
}
