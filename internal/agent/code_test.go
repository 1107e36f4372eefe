package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// cellRun is one code stream, summed up.
type cellRun struct {
	events []api.CodeEvent
	stdout string
	last   api.CodeEvent
}

func (c cellRun) exceptions() []api.CodeException {
	var out []api.CodeException
	for _, ev := range c.events {
		if ev.Type == api.CodeEventException {
			out = append(out, *ev.Exception)
		}
	}
	return out
}

// oneException fails the test unless run raised exactly one exception,
// named name with part in its value, and then ended; it returns that one.
func oneException(t *testing.T, run cellRun, name, part string) api.CodeException {
	t.Helper()
	xs := run.exceptions()
	if len(xs) != 1 || xs[0].Name != name || !strings.Contains(xs[0].Value, part) || run.last.Type != api.CodeEventEnd {
		t.Fatalf("got %+v, want one %s saying %q, then end", run.events, name, part)
	}
	return xs[0]
}

// wantKernel fails the test unless the stand-in's "count" cell says want
// ("cells=N interrupts=M"): how a test tells the same kernel from a new
// one, which why names.
func (a *testAgent) wantKernel(want, why string) {
	a.t.Helper()
	if run := a.code(api.CodeRequest{Code: "count"}); run.stdout != want || run.last.Type != api.CodeEventEnd {
		a.t.Fatalf("count: got %q (last %+v), want %q: %s", run.stdout, run.last, want, why)
	}
}

// code runs a cell and reads its whole stream, checking that exactly one
// terminal event comes, last.
func (a *testAgent) code(req api.CodeRequest) cellRun {
	a.t.Helper()
	return a.codeCtx(a.t.Context(), req, nil)
}

// codeCtx is code with ctx, handing each event to fn (when not nil) as
// it arrives.
func (a *testAgent) codeCtx(ctx context.Context, req api.CodeRequest, fn func(api.CodeEvent)) cellRun {
	a.t.Helper()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url+"/code", jsonBody(a.t, req))
	if err != nil {
		a.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		a.t.Fatalf("POST /code: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		a.t.Fatalf("POST /code %q: got status %d, want 200 (body %s)", req.Code, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		a.t.Fatalf("got Content-Type %q, want application/x-ndjson", ct)
	}
	var run cellRun
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev api.CodeEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			a.t.Fatalf("decoding event %.200q: %v", sc.Bytes(), err)
		}
		if n := len(run.events); n > 0 && isTerminal(run.events[n-1]) {
			a.t.Fatalf("cell %q: got %+v after the terminal %+v", req.Code, ev, run.events[n-1])
		}
		run.events = append(run.events, ev)
		if ev.Type == api.CodeEventStdout {
			run.stdout += ev.Text
		}
		if fn != nil {
			fn(ev)
		}
	}
	if ctx.Err() != nil {
		return run
	}
	if len(run.events) == 0 || !isTerminal(run.events[len(run.events)-1]) {
		a.t.Fatalf("cell %q: stream ended without end or error: %+v", req.Code, run.events)
	}
	run.last = run.events[len(run.events)-1]
	return run
}

func isTerminal(ev api.CodeEvent) bool {
	return ev.Type == api.CodeEventEnd || ev.Type == api.CodeEventError
}

func standInAgent(t *testing.T) *testAgent {
	a := newTestAgent(t)
	a.useStandIn()
	return a
}

func TestCodeStream(t *testing.T) {
	a := standInAgent(t)
	run := a.code(api.CodeRequest{Code: "print hello"})
	if run.stdout != "hello" || run.last.Type != api.CodeEventEnd || run.last.ExecutionCount != 1 {
		t.Fatalf("got %+v, want stdout hello, then end with execution_count 1", run.events)
	}
	run = a.code(api.CodeRequest{Code: "result"})
	if len(run.events) != 2 || run.events[0].Result == nil || !run.events[0].Result.IsMainResult || run.events[0].Result.Text != "42" || run.events[0].Result.HTML != "<b>42</b>" {
		t.Fatalf("got %+v, want the main result 42 (text and html), then end", run.events)
	}
	run = a.code(api.CodeRequest{Code: "raise"})
	types := []string{}
	for _, ev := range run.events {
		types = append(types, ev.Type)
	}
	if got, want := strings.Join(types, ","), "stderr,exception,end"; got != want {
		t.Fatalf("got events %s, want %s", got, want)
	}
	if x := run.exceptions()[0]; x.Name != "ValueError" || x.Value != "bad" || !strings.Contains(x.Traceback, "ValueError: bad") {
		t.Fatalf("got exception %+v, want ValueError bad with its traceback", x)
	}
	// The default context appeared on first use, once.
	var list api.CodeContextList
	a.doJSON("GET", "/contexts", nil, http.StatusOK, &list)
	if len(list.Contexts) != 1 || list.Contexts[0] != (api.CodeContext{ID: "default", Language: "python", Cwd: a.cfg.Workspace}) {
		t.Fatalf("got contexts %+v, want the default one in %s", list.Contexts, a.cfg.Workspace)
	}
}

func TestCodeSplitsOutput(t *testing.T) {
	a := standInAgent(t)
	run := a.code(api.CodeRequest{Code: "big 200000"})
	if want := strings.Repeat("é", 100000); run.stdout != want {
		t.Fatalf("got %d bytes of stdout, want %d", len(run.stdout), len(want))
	}
	for _, ev := range run.events {
		if len(ev.Text) > maxEventText {
			t.Fatalf("got an event of %d bytes, want at most %d", len(ev.Text), maxEventText)
		}
	}
	if len(run.events) < 200000/maxEventText+1 {
		t.Fatalf("got %d events, want the output split", len(run.events))
	}
}

func TestCodeBoundsResult(t *testing.T) {
	a := standInAgent(t)
	run := a.code(api.CodeRequest{Code: "hugeresult"})
	r := run.events[0].Result
	if r == nil || r.PNG != "" || r.Text != fmt.Sprintf("[result of %d bytes omitted: larger than 4 MiB]", 5<<20) {
		t.Fatalf("got %.300v, want the png dropped and said so", run.events[0])
	}
}

func TestBoundResult(t *testing.T) {
	big := strings.Repeat("x", maxResultItem+1)
	under := strings.Repeat("y", maxResultItem-10)
	for _, tc := range []struct {
		name    string
		in      api.CodeResult
		wantPNG bool
		dropped int
	}{
		{"small", api.CodeResult{Text: "1", PNG: "AAAA"}, true, 0},
		{"one field too big", api.CodeResult{Text: "1", HTML: big, PNG: "AAAA"}, true, len(big)},
		{"fields too big together", api.CodeResult{HTML: under, SVG: under, PNG: "AAAA"}, true, len(under)},
	} {
		got := boundResult(tc.in)
		if got.Text == "" || (tc.dropped > 0) != strings.Contains(got.Text, "omitted") {
			t.Errorf("%s: got text %.80q, want a note only when something was dropped", tc.name, got.Text)
		}
		if tc.dropped > 0 && got.Text != fmt.Sprintf("[result of %d bytes omitted: larger than 4 MiB]", tc.dropped) {
			t.Errorf("%s: got text %q, want %d bytes omitted", tc.name, got.Text, tc.dropped)
		}
		if (got.PNG != "") != tc.wantPNG {
			t.Errorf("%s: got png %q, want kept %v", tc.name, got.PNG, tc.wantPNG)
		}
		if n := encodedLen(got); n > maxResultLine {
			t.Errorf("%s: got a line of %d bytes, want at most %d", tc.name, n, maxResultLine)
		}
	}
}

func TestCodeTimeoutKeepsState(t *testing.T) {
	a := standInAgent(t)
	a.code(api.CodeRequest{Code: "print warm"})
	run := a.code(api.CodeRequest{Code: "sleep", TimeoutMs: 100})
	want := "the cell ran longer than timeout_ms=100 and was interrupted; the context keeps its state"
	if x := oneException(t, run, "TimeoutError", want); x.Value != want || !strings.Contains(x.Traceback, "in sleep") {
		t.Fatalf("got %+v, want TimeoutError %q with the interrupt's traceback", x, want)
	}
	a.wantKernel("cells=3 interrupts=1", "the same kernel")
}

func TestCodeTimeoutEscalates(t *testing.T) {
	a := standInAgent(t)
	run := a.code(api.CodeRequest{Code: "stubborn", TimeoutMs: 100})
	oneException(t, run, "TimeoutError", "state was lost")
	a.wantKernel("cells=1 interrupts=0", "a new kernel")
}

func TestCodeDeadKernel(t *testing.T) {
	a := standInAgent(t)
	a.code(api.CodeRequest{Code: "print warm"})
	run := a.code(api.CodeRequest{Code: "dead"})
	oneException(t, run, "DeadKernelError", "restarted")
	a.wantKernel("cells=1 interrupts=0", "a new kernel")
}

// TestCodeDriverDiedIdle: a driver gone between cells is a dead kernel
// found before the cell, which does not run.
func TestCodeDriverDiedIdle(t *testing.T) {
	a := standInAgent(t)
	pid, _ := strconv.Atoi(a.code(api.CodeRequest{Code: "pid"}).stdout)
	if err := syscallKill(pid); err != nil {
		t.Fatal(err)
	}
	// Reaped, the agent knows the driver ended even if its reader has
	// not seen the end of the output yet.
	waitReaped(t, pid, 10e9)
	run := a.code(api.CodeRequest{Code: "print ran"})
	if oneException(t, run, "DeadKernelError", ""); run.stdout != "" {
		t.Fatalf("got stdout %q, want the cell not run", run.stdout)
	}
	a.wantKernel("cells=1 interrupts=0", "a new kernel")
}

func TestCodeMisbehavingDriver(t *testing.T) {
	for _, cell := range []string{"exit", "garbage", "hugeline"} {
		t.Run(cell, func(t *testing.T) {
			a := standInAgent(t)
			run := a.code(api.CodeRequest{Code: cell})
			if run.last.Type != api.CodeEventError || run.last.Error == nil || run.last.Error.Code != "internal" {
				t.Fatalf("got %+v, want an internal error last", run.events)
			}
			a.wantKernel("cells=1 interrupts=0", "a new driver")
		})
	}
}

func TestCodeDisconnectInterrupts(t *testing.T) {
	a := standInAgent(t)
	ctx, cancel := context.WithCancel(t.Context())
	a.codeCtx(ctx, api.CodeRequest{Code: "sleep"}, func(ev api.CodeEvent) {
		if ev.Text == "sleeping\n" {
			cancel()
		}
	})
	a.wantKernel("cells=2 interrupts=1", "the left cell interrupted in the same kernel")
}

func TestCodeOneCellAtATime(t *testing.T) {
	a := standInAgent(t)
	flag := filepath.Join(a.cfg.Workspace, "go")
	waiting := make(chan struct{})
	first := make(chan cellRun, 1)
	go func() {
		first <- a.codeCtx(t.Context(), api.CodeRequest{Code: "waitfile " + flag}, func(ev api.CodeEvent) {
			if ev.Text == "waiting" {
				close(waiting)
			}
		})
	}()
	<-waiting
	// A second cell waits for its turn: not even its header comes while
	// the first runs.
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(a.url+"/code", "application/json", strings.NewReader(`{"code":"count"}`))
		if err != nil {
			t.Error(err)
			close(answered)
			return
		}
		answered <- resp
	}()
	select {
	case resp := <-answered:
		t.Fatalf("got an answer %v while the first cell ran, want the second to wait", resp)
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if run := <-first; run.stdout != "waitingfound" {
		t.Fatalf("got %+v, want waiting, found", run.events)
	}
	resp := <-answered
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "cells=2 interrupts=0") {
		t.Fatalf("got %s, want the second cell run after the first", b)
	}
}

func TestCodeContexts(t *testing.T) {
	a := standInAgent(t)
	if err := os.Mkdir(filepath.Join(a.cfg.Workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	a.doJSON("PUT", "/env", jsonBody(t, map[string]any{"env": map[string]string{"SANDBOX_VAR": "s"}}), http.StatusNoContent, nil)
	var cx api.CodeContext
	a.doJSON("POST", "/contexts", jsonBody(t, api.CreateContextRequest{Cwd: "sub", Env: map[string]string{"CTX_VAR": "c"}}), http.StatusCreated, &cx)
	if !strings.HasPrefix(cx.ID, "ctx_") || len(cx.ID) != 20 || cx.Language != "python" || cx.Cwd != filepath.Join(a.cfg.Workspace, "sub") {
		t.Fatalf("got %+v, want a ctx_ id, python, cwd sub", cx)
	}
	for cell, want := range map[string]string{"cwd": cx.Cwd, "env CTX_VAR": "c", "env SANDBOX_VAR": "s", "env HOME": a.cfg.Home} {
		if got := a.code(api.CodeRequest{Code: cell, ContextID: cx.ID}).stdout; got != want {
			t.Errorf("%s: got %q, want %q", cell, got, want)
		}
	}
	a.doJSON("POST", "/contexts/"+cx.ID+"/restart", nil, http.StatusOK, &cx)
	if got := a.code(api.CodeRequest{Code: "count", ContextID: cx.ID}).stdout; got != "cells=1 interrupts=0" {
		t.Fatalf("after restart: got %q, want a new kernel", got)
	}
	a.wantError("POST", "/contexts/ctx_0000000000000000/restart", nil, http.StatusNotFound, "not_found")
	a.wantError("POST", "/code", jsonBody(t, api.CodeRequest{Code: "1", ContextID: "nope"}), http.StatusNotFound, "not_found")
	a.doJSON("DELETE", "/contexts/"+cx.ID, nil, http.StatusNoContent, nil)
	a.wantError("DELETE", "/contexts/"+cx.ID, nil, http.StatusNotFound, "not_found")
	a.wantError("POST", "/code", jsonBody(t, api.CodeRequest{Code: "1", ContextID: cx.ID}), http.StatusNotFound, "not_found")

	for i := 0; i < maxContexts; i++ {
		a.doJSON("POST", "/contexts", jsonBody(t, api.CreateContextRequest{}), http.StatusCreated, nil)
	}
	msg := a.wantError("POST", "/contexts", jsonBody(t, api.CreateContextRequest{}), http.StatusConflict, "conflict")
	if !strings.Contains(msg, "16") {
		t.Fatalf("got %q, want the limit named", msg)
	}
	// The default context counts too: it cannot be made now.
	a.wantError("POST", "/code", jsonBody(t, api.CodeRequest{Code: "1"}), http.StatusConflict, "conflict")
}

func TestCodeRestartUnderACell(t *testing.T) {
	a := standInAgent(t)
	done := make(chan cellRun, 1)
	running := make(chan struct{})
	go func() {
		done <- a.codeCtx(t.Context(), api.CodeRequest{Code: "stubborn"}, func(ev api.CodeEvent) {
			if ev.Type == api.CodeEventStdout {
				close(running)
			}
		})
	}()
	<-running
	a.doJSON("POST", "/contexts/default/restart", nil, http.StatusOK, nil)
	run := <-done
	oneException(t, run, "DeadKernelError", "restarted")
}

func TestCodeBadRequests(t *testing.T) {
	a := standInAgent(t)
	for _, tc := range []struct{ name, body string }{
		{"code missing", `{}`},
		{"language", `{"code":"1","language":"r"}`},
		{"timeout", `{"code":"1","timeout_ms":-1}`},
		{"unknown field", `{"code":"1","nope":1}`},
		{"env name", `{"code":"1","env":{"A=B":"x"}}`},
		{"env value", `{"code":"1","env":{"A":"` + strings.Repeat("x", maxEnvString) + `"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.wantError("POST", "/code", strings.NewReader(tc.body), http.StatusBadRequest, "invalid_request")
		})
	}
	a.wantError("POST", "/contexts", strings.NewReader(`{"cwd":"missing"}`), http.StatusBadRequest, "invalid_request")
	a.wantError("POST", "/contexts", strings.NewReader(`{"cwd":"/etc/../x\u0000"}`), http.StatusBadRequest, "invalid_request")
	a.wantError("POST", "/contexts", strings.NewReader(`{"language":"js"}`), http.StatusBadRequest, "invalid_request")
	// An empty cell is a cell.
	if run := a.code(api.CodeRequest{Code: ""}); run.last.Type != api.CodeEventEnd {
		t.Fatalf("got %+v, want end", run.events)
	}
}

func TestCodeStartFailure(t *testing.T) {
	a := standInAgent(t)
	env := map[string]string{"STANDIN_FATAL": "ModuleNotFoundError: no kernel"}
	msg := a.wantError("POST", "/code", jsonBody(t, api.CodeRequest{Code: "1", Env: env}), http.StatusInternalServerError, "internal")
	if !strings.Contains(msg, "no kernel") || !strings.Contains(msg, "about to fail") {
		t.Fatalf("got %q, want the driver's message and its stderr", msg)
	}
	// Each later cell tries again (and here fails again).
	a.wantError("POST", "/code", jsonBody(t, api.CodeRequest{Code: "1"}), http.StatusInternalServerError, "internal")
}

func TestCodeCloseStopsKernels(t *testing.T) {
	a := standInAgent(t)
	pid, err := strconv.Atoi(a.code(api.CodeRequest{Code: "pid"}).stdout)
	if err != nil {
		t.Fatal(err)
	}
	a.srv.Close()
	waitGone(t, pid, 10e9)
}

// TestCodeRealDriver runs the embedded driver with the host's python3. A
// host with jupyter_client runs a real cell; one without (the usual host:
// the image has it) gets the driver's own start-up failure, which proves
// its framing: the message comes through the protocol, not a crash.
func TestCodeRealDriver(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed: the real driver is a Python script")
	}
	a := newTestAgent(t)
	hasKernel := exec.Command("python3", "-c", "import jupyter_client, ipykernel").Run() == nil
	if !hasKernel {
		msg := a.wantError("POST", "/code", jsonBody(t, api.CodeRequest{Code: "1+1"}), http.StatusInternalServerError, "internal")
		if !strings.Contains(msg, "jupyter_client") {
			t.Fatalf("got %q, want the driver's ModuleNotFoundError naming jupyter_client", msg)
		}
		return
	}
	run := a.code(api.CodeRequest{Code: "1+1"})
	if r := run.events[0].Result; r == nil || r.Text != "2" || !r.IsMainResult {
		t.Fatalf("got %+v, want the main result 2", run.events)
	}
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// TestCodeKilledDriverReaderEnds: a killed driver's reader ends even when
// its events are full and nobody reads them (a cell that escalated, a
// dropped driver): else it kept its goroutine, pipe and events for good.
func TestCodeKilledDriverReaderEnds(t *testing.T) {
	a := standInAgent(t)
	cx, err := a.srv.addContext("", a.cfg.Workspace, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := a.srv.driverOf(cx)
	if err != nil {
		t.Fatal(err)
	}
	if !d.send(driverOp{Op: "execute", ID: 1, Code: "flood 1000"}) {
		t.Fatal("the driver took no input")
	}
	for deadline := time.Now().Add(30 * time.Second); len(d.events) < cap(d.events); {
		if time.Now().After(deadline) {
			t.Fatalf("got %d events, want the buffer (%d) full", len(d.events), cap(d.events))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cx.dropDriver(d)
	select {
	case <-d.readEnd:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed driver's reader is still blocked on its events")
	}
}

// TestDrainEventsEnded: draining the events of a driver that died since
// its last cell ends, reporting them ended, instead of spinning on the
// closed channel.
func TestDrainEventsEnded(t *testing.T) {
	d := &driver{events: make(chan driverEvent, 4)}
	d.events <- driverEvent{Type: "stdout"}
	if !drainEvents(d) || len(d.events) != 0 {
		t.Fatalf("got %d events left, want them dropped and the events open", len(d.events))
	}
	d.events <- driverEvent{Type: "stdout"}
	close(d.events)
	done := make(chan bool, 1)
	go func() { done <- drainEvents(d) }()
	select {
	case open := <-done:
		if open {
			t.Fatal("got the events open, want them ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("drainEvents spins on the closed events")
	}
}

// TestCodeAddRacingRemove: a context removed (or the agent closed) while
// it is being made gets no driver: nothing would kill that one, and it
// would run outside maxContexts.
func TestCodeAddRacingRemove(t *testing.T) {
	for _, race := range []string{"remove", "close"} {
		t.Run(race, func(t *testing.T) {
			a := standInAgent(t)
			testHookContextAdded = func(cx *codeContext) {
				if race == "remove" {
					if err := a.srv.removeContext(cx.id); err != nil {
						t.Error(err)
					}
					return
				}
				a.srv.closeCode()
			}
			defer func() { testHookContextAdded = nil }()
			cx, err := a.srv.addContext("", a.cfg.Workspace, nil)
			testHookContextAdded = nil
			if err == nil {
				t.Fatalf("got context %s, want an error: it was removed", cx.id)
			}
			a.srv.code.mu.Lock()
			var all []*codeContext
			for _, c := range a.srv.code.ctxs {
				all = append(all, c)
			}
			a.srv.code.mu.Unlock()
			for _, c := range all {
				c.mu.Lock()
				drv := c.drv
				c.mu.Unlock()
				if drv != nil {
					drv.kill("")
					t.Fatalf("context %s got a driver after it was removed", c.id)
				}
				if _, err := a.srv.driverOf(c); err == nil {
					t.Fatalf("context %s: driverOf started a driver after close", c.id)
				}
			}
		})
	}
}

// TestCodeHonouredInterruptKeepsKernel: a kernel that honoured the
// timeout's interrupt but ends slowly is not restarted, and the stream
// tells the timeout once.
func TestCodeHonouredInterruptKeepsKernel(t *testing.T) {
	a := standInAgent(t)
	run := a.code(api.CodeRequest{Code: "slowstop", TimeoutMs: 100})
	oneException(t, run, "TimeoutError", "keeps its state")
	a.wantKernel("cells=2 interrupts=1", "the same kernel")
}

// TestCodeEnvCountsPlaceholders: a context takes the host's 256 entries of
// its own plus the placeholders of 100 secrets.
func TestCodeEnvCountsPlaceholders(t *testing.T) {
	a := standInAgent(t)
	env := map[string]string{}
	for i := range 356 {
		env[fmt.Sprintf("V%d", i)] = "x"
	}
	var cx api.CodeContext
	a.doJSON("POST", "/contexts", jsonBody(t, api.CreateContextRequest{Env: env}), http.StatusCreated, &cx)
	if got := a.code(api.CodeRequest{Code: "env V355", ContextID: cx.ID}).stdout; got != "x" {
		t.Fatalf("got %q, want the 356th entry set", got)
	}
	for i := range maxCodeEnv + 1 {
		env[fmt.Sprintf("V%d", i)] = "x"
	}
	a.wantError("POST", "/contexts", jsonBody(t, api.CreateContextRequest{Env: env}), http.StatusBadRequest, "invalid_request")
}

// TestCwdErrorsAreInvalid: a cwd whose name is too long or loops is the
// request's fault (400), for commands and contexts alike.
func TestCwdErrorsAreInvalid(t *testing.T) {
	a := standInAgent(t)
	for _, l := range [][2]string{{"loop1", "loop2"}, {"loop2", "loop1"}} {
		if err := os.Symlink(l[1], filepath.Join(a.cfg.Workspace, l[0])); err != nil {
			t.Fatal(err)
		}
	}
	for _, cwd := range []string{strings.Repeat("d", 300), strings.Repeat("d/", 2100), "loop1"} {
		a.wantError("POST", "/exec", jsonBody(t, api.ExecRequest{Cmd: api.Command{Argv: []string{"true"}}, Cwd: cwd}), http.StatusBadRequest, "invalid_request")
		a.wantError("POST", "/contexts", jsonBody(t, api.CreateContextRequest{Cwd: cwd}), http.StatusBadRequest, "invalid_request")
	}
}

// TestCodeContextCwdAsUser: a context's cwd is checked as the sandbox
// user, not as the agent's root: a directory the user cannot enter, on
// the way or through a symlink, is a 400, not a context whose every cell
// fails.
func TestCodeContextCwdAsUser(t *testing.T) {
	cfg, base := asUserConfig(t)
	uid, gid := testUID, testGID
	// The stand-in must be a program the user can run.
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	standIn := filepath.Join(base, "standin")
	if err := os.WriteFile(standIn, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Home = cfg.Workspace
	mk := func(p string, mode os.FileMode, owner int) {
		t.Helper()
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		if err := os.Chown(p, owner, owner+1); err != nil {
			t.Fatal(err)
		}
	}
	mk(cfg.Workspace, 0o755, uid)
	mk(filepath.Join(base, "private"), 0o700, 0)
	mk(filepath.Join(base, "private", "open"), 0o755, 0)
	mk(filepath.Join(base, "listonly"), 0o744, 0)
	mk(filepath.Join(cfg.Workspace, "mine"), 0o700, uid)
	mk(filepath.Join(base, "group"), 0o070, 0)
	if err := os.Chown(filepath.Join(base, "group"), 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "private"), filepath.Join(cfg.Workspace, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../group", filepath.Join(cfg.Workspace, "grouplink")); err != nil {
		t.Fatal(err)
	}
	a := serveAgent(t, cfg, func(s *Server) {
		s.code.driverArgv = []string{standIn, "-test.run=^TestStandInDriver$", standInArg}
	})

	for _, cwd := range []string{"/root", filepath.Join(base, "private"), filepath.Join(base, "private", "open"), filepath.Join(base, "listonly"), "link"} {
		msg := a.wantError("POST", "/contexts", jsonBody(t, api.CreateContextRequest{Cwd: cwd}), http.StatusBadRequest, "invalid_request")
		if !strings.Contains(msg, "permission denied") {
			t.Errorf("cwd %s: got %q, want permission denied", cwd, msg)
		}
	}
	for _, cwd := range []string{"mine", "grouplink", filepath.Join(base, "group")} {
		var cx api.CodeContext
		a.doJSON("POST", "/contexts", jsonBody(t, api.CreateContextRequest{Cwd: cwd}), http.StatusCreated, &cx)
		if run := a.code(api.CodeRequest{Code: "cwd", ContextID: cx.ID}); run.stdout == "" || run.last.Type != api.CodeEventEnd {
			t.Errorf("cwd %s: got %+v, want the cell run there", cwd, run.events)
		}
	}
}

// TestCodeContextDriverCannotStart: a new context whose driver cannot
// start is refused, not made for each of its cells to fail.
func TestCodeContextDriverCannotStart(t *testing.T) {
	a := newTestAgent(t)
	a.srv.code.driverArgv = []string{filepath.Join(a.cfg.Workspace, "no-such-driver")}
	a.wantError("POST", "/contexts", jsonBody(t, api.CreateContextRequest{}), http.StatusInternalServerError, "internal")
	var list api.CodeContextList
	a.doJSON("GET", "/contexts", nil, http.StatusOK, &list)
	if len(list.Contexts) != 0 {
		t.Fatalf("got contexts %+v, want none", list.Contexts)
	}
}
