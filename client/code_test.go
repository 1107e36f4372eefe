package client

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/withruntime/withruntime/api"
)

// streamCode answers a cell with events, flushing after each.
var streamCode = streamEvents[api.CodeEvent]

func TestRunCodeStreamsInOrderAsProduced(t *testing.T) {
	sawFirst := make(chan struct{})
	var gotReq api.CodeRequest
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/sandboxes/sbx_1/code" || r.Header.Get("Accept") != "application/x-ndjson" {
			writeError(w, 400, "invalid_request", r.Method+" "+r.URL.Path)
			return
		}
		json.NewDecoder(r.Body).Decode(&gotReq)
		streamCode(w, api.CodeEvent{Type: "stdout", Text: "one\n"})
		// The rest only comes once the client has passed the first chunk
		// on: a client that waited for the whole answer would hang here.
		select {
		case <-sawFirst:
		case <-time.After(5 * time.Second):
			return
		}
		streamCode(w,
			api.CodeEvent{Type: "stderr", Text: "two\n"},
			api.CodeEvent{Type: "result", Result: &api.CodeResult{PNG: "iVBORw0KGgo=", Text: "<Figure>"}},
			api.CodeEvent{Type: "future_event_type", Text: "ignored"},
			api.CodeEvent{Type: "stdout", Text: "three\n"},
			api.CodeEvent{Type: "result", Result: &api.CodeResult{Text: "42", JSON: json.RawMessage(`{"a":1}`), IsMainResult: true}},
			api.CodeEvent{Type: "end", ExecutionCount: 5},
		)
	}))
	var mu sync.Mutex
	var log []string
	var once sync.Once
	opts := CodeOptions{
		Stdout: func(s string) {
			mu.Lock()
			log = append(log, "out:"+s)
			mu.Unlock()
			once.Do(func() { close(sawFirst) })
		},
		Stderr: func(s string) { mu.Lock(); log = append(log, "err:"+s); mu.Unlock() },
		Result: func(r api.CodeResult) { mu.Lock(); log = append(log, "result:"+r.Text); mu.Unlock() },
	}
	req := api.CodeRequest{Code: "x = 1\nx", ContextID: "ctx_0123456789abcdef", TimeoutMs: 9000, Env: map[string]string{"A": "1"}}
	ex, err := c.RunCode(t.Context(), "sbx_1", req, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(log, "|"), "out:one\n|err:two\n|result:<Figure>|out:three\n|result:42"; got != want {
		t.Errorf("callback order: got %q, want %q", got, want)
	}
	if ex.Text() != "42" || ex.ExecutionCount != 5 || ex.Error != nil || len(ex.Results) != 2 ||
		ex.Results[0].PNG != "iVBORw0KGgo=" || string(ex.Results[1].JSON) != `{"a":1}` {
		t.Errorf("execution: got %+v", ex)
	}
	if strings.Join(ex.Stdout, "") != "one\nthree\n" || strings.Join(ex.Stderr, "") != "two\n" {
		t.Errorf("output kept: got %q %q", ex.Stdout, ex.Stderr)
	}
	if gotReq.Code != req.Code || gotReq.ContextID != req.ContextID || gotReq.TimeoutMs != 9000 || gotReq.Env["A"] != "1" {
		t.Errorf("server got %+v", gotReq)
	}
}

func TestRunCodeExceptionIsData(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamCode(w,
			api.CodeEvent{Type: "exception", Exception: &api.CodeException{Name: "TimeoutError", Value: "the cell ran longer than timeout_ms=100", Traceback: "tb"}},
			api.CodeEvent{Type: "end", ExecutionCount: 2},
		)
	}))
	ex, err := c.RunCode(t.Context(), "s", api.CodeRequest{Code: "while True: pass", TimeoutMs: 100}, CodeOptions{})
	if err != nil {
		t.Fatalf("got %v, want the timeout as data", err)
	}
	if ex.Error == nil || ex.Error.Name != "TimeoutError" || ex.Error.Traceback != "tb" || ex.Text() != "" {
		t.Errorf("got %+v, want a TimeoutError and no result", ex)
	}
}

func TestRunCodeErrorEventIsAPIError(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamCode(w,
			api.CodeEvent{Type: "stdout", Text: "partial"},
			api.CodeEvent{Type: "error", Error: &api.ErrorDetail{Code: "lease_ended", Message: "the lease ended"}},
		)
	}))
	var out []string
	_, err := c.RunCode(t.Context(), "s", api.CodeRequest{}, CodeOptions{Stdout: func(s string) { out = append(out, s) }})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "lease_ended" || ae.Status != 409 || !errors.Is(err, ErrLeaseEnded) {
		t.Fatalf("got %T %v, want the lease_ended *APIError", err, err)
	}
	if len(out) != 1 || out[0] != "partial" {
		t.Errorf("output before the error: got %q, want [partial]", out)
	}
}

func TestRunCodeBrokenStreamIsTransportError(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"ends before end", func(w http.ResponseWriter, r *http.Request) {
			streamCode(w, api.CodeEvent{Type: "stdout", Text: "x"})
		}},
		{"connection cut mid-line", func(w http.ResponseWriter, r *http.Request) {
			streamCode(w, api.CodeEvent{Type: "stdout", Text: "x"})
			io.WriteString(w, `{"type":"result","res`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, tt.handler)
			_, err := c.RunCode(t.Context(), "s", api.CodeRequest{Code: "1"}, CodeOptions{})
			var te *TransportError
			if !errors.As(err, &te) {
				t.Fatalf("got %T %v, want *TransportError", err, err)
			}
		})
	}
}

func TestRunCodeRefusedBeforeStream(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, "not_found", "no context ctx_0123456789abcdef")
	}))
	_, err := c.RunCode(t.Context(), "s", api.CodeRequest{Code: "1", ContextID: "ctx_0123456789abcdef"}, CodeOptions{})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v, want not_found", err)
	}
}

func TestContextCalls(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	var created api.CreateContextRequest
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		ctxA := api.CodeContext{ID: "ctx_0123456789abcdef", Language: "python", Cwd: "/workspace/sub"}
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/sandboxes/s/contexts":
			json.NewDecoder(r.Body).Decode(&created)
			writeJSON(w, 201, ctxA)
		case r.Method == "GET" && r.URL.Path == "/v1/sandboxes/s/contexts":
			writeJSON(w, 200, api.CodeContextList{Contexts: []api.CodeContext{{ID: "default", Language: "python", Cwd: "/workspace"}, ctxA}})
		case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/restart"):
			writeJSON(w, 200, ctxA)
		case r.Method == "DELETE" && r.URL.Path == "/v1/sandboxes/s/contexts/ctx_0123456789abcdef":
			w.WriteHeader(204)
		default:
			writeError(w, 404, "not_found", "no such context")
		}
	}))
	ctx := t.Context()
	cc, err := c.CreateContext(ctx, "s", api.CreateContextRequest{Cwd: "sub", Env: map[string]string{"B": "2"}})
	if err != nil || cc.ID != "ctx_0123456789abcdef" || cc.Cwd != "/workspace/sub" {
		t.Fatalf("CreateContext: got %+v %v", cc, err)
	}
	if created.Cwd != "sub" || created.Env["B"] != "2" {
		t.Errorf("server got %+v", created)
	}
	l, err := c.ListContexts(ctx, "s")
	if err != nil || len(l) != 2 || l[0].ID != "default" || l[1].ID != cc.ID {
		t.Fatalf("ListContexts: got %+v %v", l, err)
	}
	if rc, err := c.RestartContext(ctx, "s", cc.ID); err != nil || rc.ID != cc.ID {
		t.Fatalf("RestartContext: got %+v %v", rc, err)
	}
	if err := c.RemoveContext(ctx, "s", cc.ID); err != nil {
		t.Fatalf("RemoveContext: %v", err)
	}
	if err := c.RemoveContext(ctx, "s", "a/b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RemoveContext of an unknown id: got %v, want not_found", err)
	}
	if err := c.RemoveContext(ctx, "s", ""); err == nil {
		t.Error("RemoveContext with an empty id: got no error")
	}
	want := "POST /v1/sandboxes/s/contexts|GET /v1/sandboxes/s/contexts|POST /v1/sandboxes/s/contexts/ctx_0123456789abcdef/restart|" +
		"DELETE /v1/sandboxes/s/contexts/ctx_0123456789abcdef|DELETE /v1/sandboxes/s/contexts/a%2Fb"
	if got := strings.Join(calls, "|"); got != want {
		t.Errorf("calls: got %s, want %s", got, want)
	}
}

// A stream with a callback is kept only as its last OutputCap bytes, and
// with Discard not at all: a caller that streams a long cell holds no
// second copy of it.
func TestRunCodeBoundsStreamedOutput(t *testing.T) {
	chunk := strings.Repeat("é", 1<<19) + "\n" // 1 MiB and a byte, two-byte runes
	const chunks = 20
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var evs []api.CodeEvent
		for range chunks {
			evs = append(evs, api.CodeEvent{Type: "stdout", Text: chunk})
		}
		evs = append(evs, api.CodeEvent{Type: "stderr", Text: "err\n"},
			api.CodeEvent{Type: "result", Result: &api.CodeResult{Text: "42", IsMainResult: true}},
			api.CodeEvent{Type: "end", ExecutionCount: 1})
		streamCode(w, evs...)
	}))
	for _, discard := range []bool{false, true} {
		var streamed, results int
		ex, err := c.RunCode(t.Context(), "s", api.CodeRequest{Code: "x"}, CodeOptions{
			Stdout:  func(s string) { streamed += len(s) },
			Result:  func(api.CodeResult) { results++ },
			Discard: discard,
		})
		if err != nil {
			t.Fatal(err)
		}
		if streamed != chunks*len(chunk) || results != 1 {
			t.Errorf("discard %v: callbacks got %d bytes and %d results, want %d and 1", discard, streamed, results, chunks*len(chunk))
		}
		// stderr had no callback: kept whole either way.
		if got := strings.Join(ex.Stderr, ""); got != "err\n" {
			t.Errorf("discard %v: stderr kept: got %q, want err", discard, got)
		}
		kept := strings.Join(ex.Stdout, "")
		if discard {
			if kept != "" || len(ex.Results) != 0 || ex.ExecutionCount != 1 {
				t.Errorf("discard: got %d bytes of stdout and %d results kept, want none (count %d)", len(kept), len(ex.Results), ex.ExecutionCount)
			}
			continue
		}
		all := strings.Repeat(chunk, chunks)
		if len(kept) > OutputCap || len(kept) < OutputCap-utf8.UTFMax || !strings.HasSuffix(all, kept) || !utf8.ValidString(kept) {
			t.Errorf("stdout kept: got %d bytes (valid UTF-8 %v), want the last %d bytes of it", len(kept), utf8.ValidString(kept), OutputCap)
		}
		if ex.Text() != "42" {
			t.Errorf("results kept: got %q, want 42", ex.Text())
		}
	}
}
