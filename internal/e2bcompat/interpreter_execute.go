package e2bcompat

import (
	"context"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// executeBody is E2B's /execute request. The Python client sends nulls
// for what it lacks, JS leaves it out: both decode to the zero value.
type executeBody struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

var (
	// codeHeaderGrace is how long a cell may stay silent before the stream's
	// 200 is sent: an error the API answers at once (an unknown context)
	// still gets its own status, and a quiet cell does not run into a
	// client's wait for headers.
	codeHeaderGrace = time.Second
	// codeKeepaliveEvery is the interval of keepalive lines in a quiet cell.
	codeKeepaliveEvery = 10 * time.Second
)

// execute runs a cell through withruntime's run_code and streams E2B's
// NDJSON lines. env_vars apply to this cell only: helper cells set them in
// the kernel's os.environ before it and put back the previous values
// after it, before the end line, so the next cell sees them gone.
func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	sbx, err := s.sandbox(r)
	if err != nil {
		s.interpreterError(w, r, nil, err)
		return
	}
	var b executeBody
	if err := readCodeJSON(r, &b); err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	if err := checkCodeLanguage(b.Language); err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	ctx := r.Context()
	if b.ContextID == "" {
		if err := prepareDefault(ctx, sbx); err != nil {
			s.interpreterError(w, r, sbx, err)
			return
		}
	} else if err := checkCodeContextID(b.ContextID); err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	st := &lineStream{w: w, r: r, s: s, sbx: sbx}
	// However this ends, also with the caller gone, the env is put back.
	defer st.doRestore()
	if len(b.EnvVars) > 0 {
		st.restore = func() {
			runHelper(context.WithoutCancel(ctx), sbx, b.ContextID, restoreEnvCell)
		}
		exc, err := runHelper(ctx, sbx, b.ContextID, setEnvCell(b.EnvVars))
		if err != nil {
			st.doRestore()
			s.interpreterError(w, r, sbx, err)
			return
		}
		if exc != nil {
			exc.Value = "setting env_vars: " + exc.Value
			st.finish(exc, 0)
			return
		}
	}
	st.run(api.CodeRequest{Code: b.Code, ContextID: b.ContextID})
}

// lineStream writes one cell's NDJSON lines, each whole and flushed.
type lineStream struct {
	w       http.ResponseWriter
	r       *http.Request
	s       *Server
	sbx     *Sandbox
	started bool // the 200 is sent
	broken  bool // a write failed: the client is gone
	// restore, if set, runs once the cell is over and before its end
	// lines.
	restore func()
}

func (st *lineStream) start() {
	if st.started {
		return
	}
	st.started = true
	h := st.w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	st.w.WriteHeader(http.StatusOK)
	st.flush()
}

func (st *lineStream) flush() {
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
}

// write sends one line; JS decodes each network chunk on its own, so a
// line goes out in one write and is flushed at once.
func (st *lineStream) write(v any) {
	if st.broken {
		return
	}
	st.start()
	b, err := encodeLine(v)
	if err != nil {
		st.s.log.Error("e2b interpreter: encoding a line", "err", err)
		return
	}
	if _, err := st.w.Write(b); err != nil {
		st.broken = true
		return
	}
	st.flush()
}

// finish writes the closing lines.
func (st *lineStream) finish(exc *api.CodeException, count int) {
	st.doRestore()
	for _, l := range endLines(exc, count) {
		st.write(l)
	}
}

// doRestore runs restore once.
func (st *lineStream) doRestore() {
	if f := st.restore; f != nil {
		st.restore = nil
		f()
	}
}

// run runs the cell, passing its output on as it comes.
func (st *lineStream) run(req api.CodeRequest) {
	ctx, cancel := context.WithCancel(st.r.Context())
	defer cancel()
	// Two lines in flight at most: a line can be megabytes, and the caller
	// is who should hold them, not this layer. Each is reserved (its text
	// and its encoding) until written; a refusal ends the cell's stream.
	lines := make(chan heldLine, 2)
	var memErr error // set before cancel, read after lines is closed
	send := func(v any, size int) {
		release, err := st.sbx.C.Reserve(ctx, st.sbx.ID, 2*int64(size))
		if err != nil {
			if memErr == nil {
				memErr = err
			}
			cancel()
			return
		}
		select {
		case lines <- heldLine{v, release}:
		case <-ctx.Done():
			release()
		}
	}
	var ex *client.Execution
	var runErr error
	go func() {
		defer close(lines)
		ex, runErr = st.sbx.C.RunCode(ctx, st.sbx.ID, req, client.CodeOptions{
			Stdout: func(t string) { send(stdoutLine(t, time.Now()), len(t)) },
			Stderr: func(t string) { send(stderrLine(t, time.Now()), len(t)) },
			Result: func(r api.CodeResult) { send(resultOf(r), resultSize(r)) },
			// Everything went to the caller as it came: keep no second copy.
			Discard: true,
		})
	}()
	grace := time.NewTimer(codeHeaderGrace)
	defer grace.Stop()
	tick := time.NewTicker(codeKeepaliveEvery)
	defer tick.Stop()
loop:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break loop
			}
			st.write(l.v)
			l.release()
			if st.broken {
				cancel() // nobody reads: stop the call; lines drains below
			}
		case <-grace.C:
			st.start()
		case <-tick.C:
			if st.started {
				st.write(typeLine{Type: lineKeepalive})
			}
		}
	}
	if memErr != nil {
		runErr = memErr
	}
	if runErr == nil {
		st.finish(ex.Error, ex.ExecutionCount)
		return
	}
	if st.broken || (ctx.Err() != nil && memErr == nil) {
		return
	}
	if !st.started {
		st.doRestore()
		st.s.interpreterError(st.w, st.r, st.sbx, runErr)
		return
	}
	if codeMayBeGone(runErr) && codeSandboxGone(st.r.Context(), st.sbx) {
		// What E2B's edge does to a killed sandbox's stream: the clients
		// then ask /health and report the sandbox killed mid-request.
		panic(http.ErrAbortHandler)
	}
	st.finish(&api.CodeException{Name: sandboxErrName, Value: message(runErr)}, 0)
}

// heldLine is a line in flight to the caller and its reservation.
type heldLine struct {
	v       any
	release func()
}

// resultSize is the bytes of a result's fields.
func resultSize(r api.CodeResult) int {
	return len(r.Text) + len(r.HTML) + len(r.Markdown) + len(r.SVG) + len(r.PNG) + len(r.JPEG) +
		len(r.LaTeX) + len(r.JavaScript) + len(r.JSON)
}
