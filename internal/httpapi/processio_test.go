package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/store"
)

// TestExecUserAndStdinChecked: the host refuses a user or a keep_stdin the
// agent would refuse, before the agent sees the request.
func TestExecUserAndStdinChecked(t *testing.T) {
	e := newEnv(t, nil)
	key := e.keys[store.KeyFull]
	bad := []string{
		`{"cmd":"id","user":"admin"}`,
		`{"cmd":"cat","keep_stdin":true}`,
		`{"cmd":"cat","keep_stdin":true,"background":true,"stdin":"x"}`,
	}
	for _, body := range bad {
		resp := e.doJSON("POST", "/v1/sandboxes/sbx-1/exec", key, body)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: got status %d, want 400", body, resp.StatusCode)
			continue
		}
		if d := errorOf(t, resp); d.Code != "invalid_request" {
			t.Errorf("%s: got code %q, want invalid_request", body, d.Code)
		}
	}
	if n := len(e.agent.requests()); n != 0 {
		t.Fatalf("agent got %d requests, want none", n)
	}
	resp := e.doJSON("POST", "/v1/sandboxes/sbx-1/exec", key, `{"cmd":"cat","user":"root","keep_stdin":true,"background":true}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got status %d, want the agent's answer", resp.StatusCode)
	}
	var got api.ExecRequest
	if err := json.Unmarshal(e.agent.requests()[0].Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.User != api.UserRoot || !got.KeepStdin || !got.Background {
		t.Errorf("agent got %+v, want user root, keep_stdin and background passed on", got)
	}
}

func TestFilesUserChecked(t *testing.T) {
	e := newEnv(t, nil)
	key := e.keys[store.KeyFull]
	for _, path := range []string{"/files", "/files/list", "/files/stat", "/archive"} {
		resp := e.do("GET", "/v1/sandboxes/sbx-1"+path+"?path=a&user=admin", key, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s user=admin: got status %d, want 400", path, resp.StatusCode)
		}
	}
	if n := len(e.agent.requests()); n != 0 {
		t.Fatalf("agent got %d requests, want none", n)
	}
	resp := e.do("POST", "/v1/sandboxes/sbx-1/files/mkdir?path=a&user=root", key, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mkdir user=root: got status %d, want 200", resp.StatusCode)
	}
	if got := e.agent.requests()[0]; got.Path != "/files/mkdir" || got.RawQuery != "path=a&user=root" {
		t.Errorf("agent got %s ? %s, want /files/mkdir ? path=a&user=root", got.Path, got.RawQuery)
	}
}

func TestProcessStdinAndStreamForwarded(t *testing.T) {
	e := newEnv(t, nil)
	full, ro := e.keys[store.KeyFull], e.keys[store.KeyReadOnly]
	resp := e.do("POST", "/v1/sandboxes/sbx-1/processes/42/stdin?close=true", full, strings.NewReader("in\x00put"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stdin: got status %d, want the agent's 200", resp.StatusCode)
	}
	got := e.agent.requests()[0]
	if got.Method != "POST" || got.Path != "/processes/42/stdin" || got.RawQuery != "close=true" || string(got.Body) != "in\x00put" {
		t.Errorf("agent got %s %s ? %s body %q, want the stdin request as sent", got.Method, got.Path, got.RawQuery, got.Body)
	}
	resp = e.do("POST", "/v1/sandboxes/sbx-1/processes/42/stdin", full, strings.NewReader(strings.Repeat("x", api.MaxStdinBody+1)))
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("stdin over %d bytes: got status %d, want 413", api.MaxStdinBody, resp.StatusCode)
	}
	resp = e.do("POST", "/v1/sandboxes/sbx-1/processes/42/stdin", ro, strings.NewReader("x"))
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("stdin with a read-only key: got status %d, want 403", resp.StatusCode)
	}
	resp = e.do("GET", "/v1/sandboxes/sbx-1/processes/42/stream?stdout_offset=3&stderr_offset=0", ro, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream with a read-only key: got status %d, want 200", resp.StatusCode)
	}
	reqs := e.agent.requests()
	if got := reqs[len(reqs)-1]; got.Path != "/processes/42/stream" || got.RawQuery != "stdout_offset=3&stderr_offset=0" {
		t.Errorf("agent got %s ? %s, want the stream request as sent", got.Path, got.RawQuery)
	}
	if k, ok := guardedStream("/processes/42/stream"); !ok || k.end != api.EventExit {
		t.Errorf("got %+v %v for a follow stream, want it guarded like an exec stream", k, ok)
	}
}
