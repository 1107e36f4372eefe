package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// testAgent is an agent serving on loopback, running commands as the
// user running the test, with a fresh workspace.
type testAgent struct {
	t   *testing.T
	srv *Server
	url string
	cfg Config
}

func newTestAgent(t *testing.T) *testAgent {
	t.Helper()
	cfg := DefaultConfig()
	cfg.UID, cfg.GID = os.Getuid(), os.Getgid()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace = ws
	cfg.Home = ws
	cfg.BaseEnv["HOME"] = ws
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := New(cfg)
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return &testAgent{t: t, srv: s, url: ts.URL, cfg: cfg}
}

// do sends a request and returns the response with its body read.
func (a *testAgent) do(method, path string, body io.Reader) (*http.Response, []byte) {
	a.t.Helper()
	req, err := http.NewRequestWithContext(a.t.Context(), method, a.url+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, b
}

// doJSON sends a request, checks the status and decodes the answer into out
// (when not nil).
func (a *testAgent) doJSON(method, path string, body io.Reader, want int, out any) {
	a.t.Helper()
	resp, b := a.do(method, path, body)
	if resp.StatusCode != want {
		a.t.Fatalf("%s %s: got status %d, want %d (body %s)", method, path, resp.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
}

// wantError checks for a JSON error with the given status and code, and
// returns its message.
func (a *testAgent) wantError(method, path string, body io.Reader, status int, code string) string {
	a.t.Helper()
	resp, b := a.do(method, path, body)
	var eb api.ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil {
		a.t.Fatalf("%s %s: got body %q, want a JSON error: %v", method, path, b, err)
	}
	if resp.StatusCode != status || eb.Error.Code != code {
		a.t.Fatalf("%s %s: got %d %q (%s), want %d %q", method, path, resp.StatusCode, eb.Error.Code, eb.Error.Message, status, code)
	}
	return eb.Error.Message
}

func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// result is a foreground exec's stream, summed up.
type result struct {
	events []api.ExecEvent
	stdout string
	stderr string
	exit   api.ExecEvent
}

func (r result) code() int {
	if r.exit.ExitCode == nil {
		return -1
	}
	return *r.exit.ExitCode
}

// run runs a foreground exec and reads its whole stream.
func (a *testAgent) run(req api.ExecRequest) result {
	a.t.Helper()
	var res result
	a.stream(a.t.Context(), req, func(ev api.ExecEvent) bool {
		res.events = append(res.events, ev)
		switch ev.Type {
		case api.EventStdout, api.EventStderr:
			data, err := ev.Output()
			if err != nil {
				a.t.Errorf("event %+v: %v", ev, err)
			}
			if ev.Type == api.EventStdout {
				res.stdout += data
			} else {
				res.stderr += data
			}
		case api.EventExit:
			res.exit = ev
		}
		return true
	})
	if res.exit.Type != api.EventExit {
		a.t.Fatalf("stream of %+v ended without an exit event: %+v", req, res.events)
	}
	if last := res.events[len(res.events)-1]; last.Type != api.EventExit {
		a.t.Fatalf("got last event %+v, want exit", last)
	}
	if res.events[0].Type != api.EventStart {
		a.t.Fatalf("got first event %+v, want start", res.events[0])
	}
	return res
}

// stream posts an exec and hands each event to fn as it arrives, until fn
// returns false or the stream ends.
func (a *testAgent) stream(ctx context.Context, req api.ExecRequest, fn func(api.ExecEvent) bool) {
	a.t.Helper()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url+"/exec", jsonBody(a.t, req))
	if err != nil {
		a.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		a.t.Fatalf("POST /exec: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		a.t.Fatalf("POST /exec: got status %d, want 200 (body %s)", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		a.t.Fatalf("got Content-Type %q, want application/x-ndjson", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			a.t.Fatalf("decoding event %q: %v", sc.Bytes(), err)
		}
		if !fn(ev) {
			return
		}
	}
}

func (a *testAgent) write(rel, content string) string {
	a.t.Helper()
	p := filepath.Join(a.cfg.Workspace, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		a.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		a.t.Fatal(err)
	}
	return p
}

func sh(s string) api.Command { return api.Command{Shell: s} }

func argv(a ...string) api.Command { return api.Command{Argv: a} }

// readPid reads a pid a command wrote to a file, waiting for it to appear.
func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("reading %s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid is a process that has not yet exited (a zombie
// waiting for its reaper counts as gone).
func alive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// waitReaped fails the test unless pid has been reaped (not even a
// zombie) within d: whoever waits for it has seen it end by then.
func waitReaped(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if _, _, ok := procStat(pid); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d is not reaped", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitGone fails the test unless pid is gone within d.
func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
