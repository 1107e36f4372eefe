package httpapi

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
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// A terminal's WebSocket (GET /v1/sandboxes/{id}/pty) is a client of the
// agent's routes for background processes: it starts a process with pty
// (POST /exec), or looks one up to attach to again (?pty_id=), then
// relays: the process's output stream (GET .../stream) to binary frames,
// binary frames to POST .../stdin, and resize messages to POST
// .../resize, one request at a time so that input keeps its order. The
// connection ending never ends the terminal: a client attaches again with
// ?pty_id= and gets the output kept meanwhile (the last 64 KiB), then what
// follows. The process ends when it exits, is killed (POST
// .../processes/{pid}/kill) or the sandbox ends.

// Bounds of a terminal's WebSocket.
const (
	// maxPtyAttached bounds the WebSockets attached to one sandbox's
	// terminals at once, across all its terminals.
	maxPtyAttached = 64
	// ptyPing is how often the server pings the client, and ptyPongWait
	// how long the answer may take: a client that went away without a
	// word (a dropped network) lets go of its slot within their sum.
	ptyPing     = 30 * time.Second
	ptyPongWait = 30 * time.Second
	// ptyWriteWait bounds one frame written to a client that stops
	// reading: output is not held for it beyond that.
	ptyWriteWait = 30 * time.Second
	// ptyAgentAnswer bounds how much of an agent's answer (a Process, an
	// error) is read.
	ptyAgentAnswer = 1 << 20
)

// ptyAttachments counts the WebSockets attached per sandbox.
type ptyAttachments struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *ptyAttachments) acquire(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	if a.n[id] >= maxPtyAttached {
		return false
	}
	a.n[id]++
	return true
}

func (a *ptyAttachments) release(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[id]--; a.n[id] <= 0 {
		delete(a.n, id)
	}
}

// ptyParams reads the query of GET .../pty: either pty_id, or what to
// start.
func ptyParams(q url.Values) (pid int, req api.ExecRequest, err error) {
	if v := q.Get("pty_id"); v != "" {
		pid, err = strconv.Atoi(v)
		if err != nil || pid <= 0 {
			return 0, req, sandbox.Errorf(sandbox.KindInvalid, "pty_id must be a positive integer, not %q", v)
		}
		for _, k := range []string{"cmd", "user", "cwd", "env"} {
			if q.Has(k) {
				return 0, req, sandbox.Errorf(sandbox.KindInvalid, "pty_id attaches to a running terminal: %s is for a new one", k)
			}
		}
	}
	size := api.PtySize{Cols: 80, Rows: 24}
	for _, f := range []struct {
		name string
		v    *int
	}{{"cols", &size.Cols}, {"rows", &size.Rows}} {
		if s := q.Get(f.name); s != "" {
			if *f.v, err = strconv.Atoi(s); err != nil {
				return 0, req, sandbox.Errorf(sandbox.KindInvalid, "%s must be an integer, not %q", f.name, s)
			}
		}
	}
	if err := size.Check(); err != nil {
		return 0, req, sandbox.Errorf(sandbox.KindInvalid, "%v", err)
	}
	req = api.ExecRequest{
		Cmd:        api.Command{Argv: q["cmd"]},
		Cwd:        q.Get("cwd"),
		User:       q.Get("user"),
		Background: true,
		Pty:        &size,
	}
	if err := api.CheckUser(req.User); err != nil {
		return 0, req, sandbox.Errorf(sandbox.KindInvalid, "%v, not %q", err, req.User)
	}
	if len(req.Cmd.Argv) > 0 && req.Cmd.Argv[0] == "" {
		return 0, req, sandbox.Errorf(sandbox.KindInvalid, "cmd must not start with an empty argument")
	}
	for _, kv := range q["env"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return 0, req, sandbox.Errorf(sandbox.KindInvalid, "env must be NAME=VALUE, not %q", kv)
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[k] = v
	}
	return pid, req, nil
}

// pty serves a terminal over a WebSocket. What can be refused is refused
// before the WebSocket opens, as the API's JSON error; after, errors are
// an "error" message and the close.
func (s *server) pty(w http.ResponseWriter, r *http.Request, c caller) error {
	// Nothing starts in the sandbox for a request that cannot become a
	// WebSocket.
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || !headerHasToken(r.Header, "Connection", "upgrade") {
		return sandbox.Errorf(sandbox.KindInvalid, "GET .../pty is a WebSocket: send the handshake (Connection: Upgrade, Upgrade: websocket)")
	}
	pid, req, err := ptyParams(r.URL.Query())
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	rt, err := s.cfg.Sandboxes.Agent(r.Context(), c.account, id)
	if err != nil {
		return err
	}
	if !s.ptys.acquire(id) {
		return sandbox.Errorf(sandbox.KindConflict, "%d connections are attached to the terminals of sandbox %s, the most there may be", maxPtyAttached, id)
	}
	defer s.ptys.release(id)
	ag := &agentClient{rt: rt, requestID: infoFrom(r.Context()).id}
	var p api.Process
	if pid > 0 {
		if err := ag.call(r.Context(), http.MethodGet, fmt.Sprintf("/processes/%d", pid), "output=false", nil, &p); err != nil {
			return err
		}
		if !p.Pty {
			return sandbox.Errorf(sandbox.KindConflict, "process %d has no terminal", pid)
		}
	} else {
		if req.Env, err = s.addPlaceholders(r.Context(), c.account, req.Env); err != nil {
			return err
		}
		body, _ := json.Marshal(req) // strings and numbers only: cannot fail
		if err := ag.call(r.Context(), http.MethodPost, "/exec", "", body, &p); err != nil {
			return err
		}
	}
	// A client that offered the subprotocol (a browser sending its key as
	// another, auth.go) gets it selected; others get none, as before.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{api.PtySubprotocol}})
	if err != nil {
		// Accept answered the client (not a WebSocket handshake, or an
		// origin refused).
		infoFrom(r.Context()).err = err
		return nil
	}
	conn.SetReadLimit(api.MaxPtyFrame)
	t := &ptySession{conn: conn, ag: ag, pid: p.Pid}
	t.run(r.Context(), p)
	return nil
}

// ptySession is one WebSocket attached to one terminal.
type ptySession struct {
	conn *websocket.Conn
	ag   *agentClient
	pid  int
}

// run relays until the process ends, the client leaves or the sandbox's
// agent cannot be reached.
func (t *ptySession) run(ctx context.Context, p api.Process) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if p.Pid == 0 {
		// The command could not start (not found, not executable): its
		// reason and exit code, as a shell's.
		_ = t.write(ctx, websocket.MessageBinary, []byte(strings.ReplaceAll(p.Stderr, "\n", "\r\n")))
		t.end(ctx, p.ExitCode)
		return
	}
	if err := t.message(ctx, api.PtyMessage{Type: api.PtyMsgStart, PtyID: p.Pid}); err != nil {
		return
	}
	go t.ping(ctx, cancel)
	go func() {
		defer cancel()
		t.input(ctx)
	}()
	t.output(ctx)
}

// output relays the terminal's output stream, then its end.
func (t *ptySession) output(ctx context.Context) {
	resp, err := t.ag.do(ctx, http.MethodGet, fmt.Sprintf("/processes/%d/stream", t.pid), "", nil)
	if err != nil {
		t.fail(ctx, err)
		return
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.ExecEvent
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() == nil {
				t.fail(ctx, sandbox.Wrap(sandbox.KindInternal, err, "the terminal's output stream broke off"))
			}
			return
		}
		switch ev.Type {
		case api.EventStdout, api.EventStderr:
			b, err := ev.Output()
			if err != nil {
				t.fail(ctx, sandbox.Wrap(sandbox.KindInternal, err, "the agent sent output that is not base64"))
				return
			}
			if t.write(ctx, websocket.MessageBinary, []byte(b)) != nil {
				return
			}
		case api.EventExit:
			t.end(ctx, ev.ExitCode)
			return
		case api.EventError:
			d := api.ErrorDetail{Code: string(sandbox.KindInternal), Message: "the terminal's stream ended with an error"}
			if ev.Error != nil {
				d = *ev.Error
			}
			_ = t.message(ctx, api.PtyMessage{Type: api.PtyMsgError, Code: d.Code, Message: d.Message})
			t.conn.Close(websocket.StatusInternalError, "error")
			return
		}
	}
}

// input relays the client's frames until it leaves or breaks the protocol.
func (t *ptySession) input(ctx context.Context) {
	for {
		typ, b, err := t.conn.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			if len(b) == 0 {
				continue
			}
			if err := t.ag.call(ctx, http.MethodPost, fmt.Sprintf("/processes/%d/stdin", t.pid), "", b, nil); err != nil {
				if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					// The process ended or stopped reading: the output
					// stream says how it ended.
					continue
				}
				return
			}
			continue
		}
		var m api.PtyMessage
		if err := json.Unmarshal(b, &m); err != nil || m.Type != api.PtyMsgResize {
			t.conn.Close(websocket.StatusUnsupportedData, `text frames are JSON control messages: {"type":"resize","cols":N,"rows":N}`)
			return
		}
		size, _ := json.Marshal(api.PtySize{Cols: m.Cols, Rows: m.Rows})
		if err := t.ag.call(ctx, http.MethodPost, fmt.Sprintf("/processes/%d/resize", t.pid), "", size, nil); err != nil {
			var se *sandbox.Error
			if errors.As(err, &se) && se.Kind == sandbox.KindInvalid {
				t.conn.Close(websocket.StatusPolicyViolation, truncate(se.Error(), 120))
				return
			}
		}
	}
}

// ping closes the connection when the client stops answering pings.
func (t *ptySession) ping(ctx context.Context, cancel context.CancelFunc) {
	tick := time.NewTicker(ptyPing)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, done := context.WithTimeout(ctx, ptyPongWait)
		err := t.conn.Ping(pctx)
		done()
		if err != nil {
			cancel()
			t.conn.CloseNow()
			return
		}
	}
}

func (t *ptySession) write(ctx context.Context, typ websocket.MessageType, b []byte) error {
	wctx, cancel := context.WithTimeout(ctx, ptyWriteWait)
	defer cancel()
	return t.conn.Write(wctx, typ, b)
}

func (t *ptySession) message(ctx context.Context, m api.PtyMessage) error {
	b, _ := json.Marshal(m) // strings and numbers only: cannot fail
	return t.write(ctx, websocket.MessageText, b)
}

// end sends the exit message and closes the connection.
func (t *ptySession) end(ctx context.Context, code *int) {
	if t.message(ctx, api.PtyMessage{Type: api.PtyMsgExit, ExitCode: code}) == nil {
		t.conn.Close(websocket.StatusNormalClosure, "exited")
	}
	t.conn.CloseNow()
}

// fail sends err as an error message and closes the connection.
func (t *ptySession) fail(ctx context.Context, err error) {
	d := ErrorDetail(err)
	_ = t.message(ctx, api.PtyMessage{Type: api.PtyMsgError, Code: d.Code, Message: d.Message})
	t.conn.Close(websocket.StatusInternalError, "error")
	t.conn.CloseNow()
}

// headerHasToken reports whether header name of h lists token, as
// Connection: keep-alive, Upgrade does.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// agentClient sends requests of the API's own to one sandbox's agent.
type agentClient struct {
	rt        http.RoundTripper
	requestID string
}

// do sends a request and returns a 2xx answer; any other is the agent's
// error, as the API's.
func (a *agentClient) do(ctx context.Context, method, path, query string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, (&url.URL{Scheme: "http", Host: agentHost, Path: path, RawQuery: query}).String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Request-Id", a.requestID)
	resp, err := a.rt.RoundTrip(req)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "could not reach the sandbox's agent")
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, ptyAgentAnswer))
	if json.Unmarshal(b, &eb) != nil || eb.Error.Code == "" {
		return nil, sandbox.Errorf(sandbox.KindInternal, "the sandbox's agent answered %s", resp.Status)
	}
	return nil, sandbox.Errorf(sandbox.Kind(eb.Error.Code), "%s", eb.Error.Message)
}

// call is do, with the answer decoded into out unless nil.
func (a *agentClient) call(ctx context.Context, method, path, query string, body []byte, out any) error {
	resp, err := a.do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, ptyAgentAnswer)).Decode(out); err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "the sandbox's agent answered with what is not JSON")
	}
	return nil
}
