package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

func intp(i int) *int { return &i }

// streamEvents answers with an NDJSON stream of events (an exec's or a
// cell's), flushing after each.
func streamEvents[E any](w http.ResponseWriter, events ...E) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(200)
	enc := json.NewEncoder(w)
	for _, ev := range events {
		enc.Encode(ev)
		w.(http.Flusher).Flush()
	}
}

// logWriter records writes, in order, for both streams.
type logWriter struct {
	mu     *sync.Mutex
	log    *[]string
	prefix string
	onData func(string)
}

func (l logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	*l.log = append(*l.log, l.prefix+string(p))
	l.mu.Unlock()
	if l.onData != nil {
		l.onData(string(p))
	}
	return len(p), nil
}

func TestExecStreamsInOrderAsProduced(t *testing.T) {
	sawFirst := make(chan struct{})
	var gotReq api.ExecRequest
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sandboxes/sbx_1/exec" || r.Header.Get("Accept") != "application/x-ndjson" {
			writeError(w, 400, "invalid_request", r.URL.Path)
			return
		}
		json.NewDecoder(r.Body).Decode(&gotReq)
		streamEvents(w, api.ExecEvent{Type: "start", Pid: 7}, api.ExecEvent{Type: "stdout", Data: "one\n"})
		// The rest only comes once the client has passed the first chunk
		// on: a client that waited for the whole answer would hang here.
		select {
		case <-sawFirst:
		case <-time.After(5 * time.Second):
			return
		}
		enc := json.NewEncoder(w)
		for _, ev := range []api.ExecEvent{
			{Type: "stderr", Data: "two\n"},
			{Type: "future_event_type", Data: "ignored"},
			{Type: "stdout", Data: "three\n"},
			{Type: "exit", ExitCode: intp(3), DurationMs: 1500},
		} {
			enc.Encode(ev)
		}
	}))
	var mu sync.Mutex
	var log []string
	var once sync.Once
	out := logWriter{&mu, &log, "out:", func(string) { once.Do(func() { close(sawFirst) }) }}
	errw := logWriter{&mu, &log, "err:", nil}
	req := api.ExecRequest{Cmd: api.Command{Argv: []string{"python3", "-c", "print(1)"}}, Cwd: "/tmp", TimeoutMs: 90000}
	res, err := c.Exec(t.Context(), "sbx_1", req, ExecOptions{Stdout: out, Stderr: errw})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(log, "|"), "out:one\n|err:two\n|out:three\n"; got != want {
		t.Errorf("output order: got %q, want %q", got, want)
	}
	if res.ExitCode != 3 || res.TimedOut || res.Pid != 7 || res.Duration != 1500*time.Millisecond {
		t.Errorf("result: got %+v", res)
	}
	if res.Stdout != "" || res.Stderr != "" {
		t.Errorf("output kept although writers were given: %q %q", res.Stdout, res.Stderr)
	}
	if len(gotReq.Cmd.Argv) != 3 || gotReq.Cwd != "/tmp" || gotReq.TimeoutMs != 90000 || gotReq.Background {
		t.Errorf("server got %+v", gotReq)
	}
}

func TestExecKeepsOutputWithoutWriters(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamEvents(w,
			api.ExecEvent{Type: "start", Pid: 1},
			api.ExecEvent{Type: "stdout", Data: "a"},
			api.ExecEvent{Type: "stderr", Data: "b"},
			api.ExecEvent{Type: "stdout", Data: "c"},
			api.ExecEvent{Type: "exit", TimedOut: true},
		)
	}))
	var errs strings.Builder
	res, err := c.Exec(t.Context(), "s", api.ExecRequest{Cmd: api.Command{Shell: "x"}}, ExecOptions{Stderr: &errs})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "ac" || res.Stderr != "" || errs.String() != "b" {
		t.Errorf("got stdout %q stderr %q written %q", res.Stdout, res.Stderr, errs.String())
	}
	if res.ExitCode != -1 || !res.TimedOut {
		t.Errorf("got exit %d timed out %v, want -1 true", res.ExitCode, res.TimedOut)
	}
}

func TestExecOutputCap(t *testing.T) {
	// Events as big as the server passes (its lines are at most 256 KiB),
	// 40 MiB in all.
	chunk := strings.Repeat("x", 128<<10)
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		enc := json.NewEncoder(w)
		enc.Encode(api.ExecEvent{Type: "stdout", Data: "HEAD"})
		for range 320 {
			enc.Encode(api.ExecEvent{Type: "stdout", Data: chunk})
		}
		enc.Encode(api.ExecEvent{Type: "stdout", Data: "TAIL"})
		enc.Encode(api.ExecEvent{Type: "stderr", Data: "small"})
		enc.Encode(api.ExecEvent{Type: "exit", ExitCode: intp(0)})
	}))
	res, err := c.Exec(t.Context(), "s", api.ExecRequest{Cmd: api.Command{Shell: "x"}}, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != OutputCap || !res.StdoutTruncated {
		t.Errorf("stdout: got %d bytes truncated=%v, want %d true", len(res.Stdout), res.StdoutTruncated, OutputCap)
	}
	if !strings.HasSuffix(res.Stdout, "TAIL") || strings.Contains(res.Stdout, "HEAD") {
		t.Error("stdout does not keep the last bytes")
	}
	if res.Stderr != "small" || res.StderrTruncated {
		t.Errorf("stderr: got %q truncated=%v", res.Stderr, res.StderrTruncated)
	}
}

func TestExecErrorEventIsAPIError(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamEvents(w,
			api.ExecEvent{Type: "start", Pid: 1},
			api.ExecEvent{Type: "stdout", Data: "partial"},
			api.ExecEvent{Type: "error", Error: &api.ErrorDetail{Code: "lease_ended", Message: "the lease ended"}},
		)
	}))
	var out strings.Builder
	_, err := c.Exec(t.Context(), "s", api.ExecRequest{Cmd: api.Command{Shell: "x"}}, ExecOptions{Stdout: &out})
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got %T %v, want *APIError", err, err)
	}
	if ae.Code != "lease_ended" || ae.Status != 409 || ae.Message != "the lease ended" {
		t.Errorf("got %+v", ae)
	}
	if !errors.Is(err, ErrLeaseEnded) {
		t.Error("errors.Is(err, ErrLeaseEnded) = false")
	}
	if out.String() != "partial" {
		t.Errorf("output before the error: got %q, want %q", out.String(), "partial")
	}
}

func TestExecRefusedBeforeStream(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 409, "conflict", "sandbox is paused")
	}))
	_, err := c.Exec(t.Context(), "s", api.ExecRequest{Cmd: api.Command{Shell: "x"}}, ExecOptions{})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("got %v, want conflict", err)
	}
}

func TestExecBrokenStreamIsTransportError(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"ends before exit", func(w http.ResponseWriter, r *http.Request) {
			streamEvents(w, api.ExecEvent{Type: "start", Pid: 1}, api.ExecEvent{Type: "stdout", Data: "x"})
		}},
		{"connection cut mid-line", func(w http.ResponseWriter, r *http.Request) {
			streamEvents(w, api.ExecEvent{Type: "start", Pid: 1})
			io.WriteString(w, `{"type":"stdout","da`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		{"empty answer", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
		}},
		{"garbage", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			io.WriteString(w, "not json\n")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, tt.handler)
			_, err := c.Exec(t.Context(), "s", api.ExecRequest{Cmd: api.Command{Shell: "x"}}, ExecOptions{Stdout: io.Discard})
			var te *TransportError
			if !errors.As(err, &te) {
				t.Fatalf("got %T %v, want *TransportError", err, err)
			}
			if !strings.HasPrefix(te.Op, "POST ") || !strings.HasSuffix(te.Op, "/v1/sandboxes/s/exec") {
				t.Errorf("op: got %q", te.Op)
			}
		})
	}
}

func TestExecContextCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamEvents(w, api.ExecEvent{Type: "start", Pid: 1})
		<-r.Context().Done()
	}))
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	_, err := c.Exec(ctx, "s", api.ExecRequest{Cmd: api.Command{Shell: "sleep 100"}}, ExecOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	var te *TransportError
	if errors.As(err, &te) {
		t.Error("cancellation reported as a TransportError")
	}
}

func TestProcesses(t *testing.T) {
	var polls atomic.Int32
	var startReq api.ExecRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&startReq)
		writeJSON(w, 201, api.Process{Pid: 42, Running: true})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/processes/{pid}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("pid") != "42" {
			writeError(w, 404, "not_found", "pid")
			return
		}
		if r.URL.Query().Get("wait") != "true" {
			writeJSON(w, 200, api.Process{Pid: 42, Running: true, Stdout: "so far"})
			return
		}
		if r.URL.Query().Get("timeout_ms") == "" {
			writeError(w, 400, "invalid_request", "no timeout_ms")
			return
		}
		// Two polls end without the process ending (the second at once,
		// like a server that ignores wait), the third sees its end.
		if n := polls.Add(1); n < 3 {
			writeJSON(w, 200, api.Process{Pid: 42, Running: true})
			return
		}
		writeJSON(w, 200, api.Process{Pid: 42, Running: false, ExitCode: intp(0), Stdout: "done"})
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/processes/{pid}/kill", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.Process{Pid: 42, Running: false, ExitCode: intp(137)})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/processes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.ProcessList{Processes: []api.Process{{Pid: 42}}})
	})
	c := newTestClient(t, mux)
	ctx := t.Context()

	p, err := c.StartProcess(ctx, "s", api.ExecRequest{Cmd: api.Command{Argv: []string{"server"}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid != 42 || !startReq.Background {
		t.Errorf("start: got pid %d, background sent %v", p.Pid, startReq.Background)
	}
	if p, err = c.GetProcess(ctx, "s", 42); err != nil || p.Stdout != "so far" {
		t.Errorf("get: got %+v, %v", p, err)
	}
	p, err = c.WaitProcess(ctx, "s", 42)
	if err != nil {
		t.Fatal(err)
	}
	if p.Running || p.Stdout != "done" || polls.Load() != 3 {
		t.Errorf("wait: got %+v after %d polls", p, polls.Load())
	}
	if p, err = c.KillProcess(ctx, "s", 42); err != nil || *p.ExitCode != 137 {
		t.Errorf("kill: got %+v, %v", p, err)
	}
	l, err := c.ListProcesses(ctx, "s")
	if err != nil || len(l) != 1 {
		t.Errorf("list: got %v, %v", l, err)
	}
	if _, err := c.GetProcess(ctx, "s", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown pid: got %v, want not_found", err)
	}
}

func TestFiles(t *testing.T) {
	files := map[string][]byte{}
	var lastQuery url.Values
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/sandboxes/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		lastQuery = r.URL.Query()
		b, _ := io.ReadAll(r.Body)
		p := r.URL.Query().Get("path")
		files[p] = b
		writeJSON(w, 200, api.FileInfo{Name: p, Path: "/workspace/" + p, Type: "file", Size: int64(len(b))})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Query().Get("path")]
		if !ok {
			writeError(w, 404, "not_found", "no such file")
			return
		}
		w.Write(b)
	})
	mux.HandleFunc("DELETE /v1/sandboxes/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		lastQuery = r.URL.Query()
		delete(files, r.URL.Query().Get("path"))
		w.WriteHeader(204)
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/stat", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		writeJSON(w, 200, api.FileInfo{Name: p, Size: int64(len(files[p])), Type: "file"})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/list", func(w http.ResponseWriter, r *http.Request) {
		var l api.FileList
		for p := range files {
			l.Entries = append(l.Entries, api.FileInfo{Name: p})
		}
		writeJSON(w, 200, l)
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/files/mkdir", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.FileInfo{Path: r.URL.Query().Get("path"), Type: "dir"})
	})
	c := newTestClient(t, mux)
	ctx := t.Context()

	name := "dir with space/a&b.txt"
	fi, err := c.WriteFile(ctx, "s", name, strings.NewReader("hello"), 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size != 5 || lastQuery.Get("mode") != "0755" || lastQuery.Get("path") != name {
		t.Errorf("write: got %+v, query %v", fi, lastQuery)
	}
	b, err := c.ReadFile(ctx, "s", name)
	if err != nil || string(b) != "hello" {
		t.Errorf("read: got %q, %v", b, err)
	}
	if fi, err = c.StatFile(ctx, "s", name); err != nil || fi.Size != 5 {
		t.Errorf("stat: got %+v, %v", fi, err)
	}
	if l, err := c.ListFiles(ctx, "s", "."); err != nil || len(l) != 1 {
		t.Errorf("list: got %v, %v", l, err)
	}
	if fi, err = c.MakeDir(ctx, "s", "/tmp/x"); err != nil || fi.Type != "dir" || fi.Path != "/tmp/x" {
		t.Errorf("mkdir: got %+v, %v", fi, err)
	}
	if err := c.RemoveFile(ctx, "s", name, true); err != nil || lastQuery.Get("recursive") != "true" {
		t.Errorf("remove: got %v, query %v", err, lastQuery)
	}
	if _, err := c.ReadFile(ctx, "s", name); !errors.Is(err, ErrNotFound) {
		t.Errorf("read removed file: got %v, want not_found", err)
	}
}
