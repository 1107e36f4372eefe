package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/store"
)

func TestCodeRequestsChecked(t *testing.T) {
	e := newEnv(t, nil)
	key := e.keys[store.KeyFull]
	tests := []struct {
		name, method, path, body string
		want                     string // in the message
	}{
		{"no code", "POST", "/code", `{"context_id":"default"}`, "code is required"},
		{"empty body", "POST", "/code", ``, "empty"},
		{"other language", "POST", "/code", `{"code":"1","language":"r"}`, "language"},
		{"negative timeout", "POST", "/code", `{"code":"1","timeout_ms":-1}`, "timeout_ms"},
		{"context id of another shape", "POST", "/code", `{"code":"1","context_id":"ctx_../../x"}`, "context_id"},
		{"context id in capitals", "POST", "/code", `{"code":"1","context_id":"ctx_0123456789ABCDEF"}`, "context_id"},
		{"env name with =", "POST", "/code", `{"code":"1","env":{"A=B":"1"}}`, "env name"},
		{"env name empty", "POST", "/contexts", `{"env":{"":"1"}}`, "env name"},
		{"env too long", "POST", "/code", `{"code":"1","env":` + manyEnv(maxContextEnv+1) + `}`, "env has 257 values, more than 256"},
		{"context env too long", "POST", "/contexts", `{"env":` + manyEnv(maxContextEnv+1) + `}`, "env has 257 values, more than 256"},
		{"unknown field", "POST", "/code", `{"code":"1","kernel":"x"}`, "kernel"},
		{"NUL in code", "POST", "/code", `{"code":"a\u0000b"}`, "NUL"},
		{"context of another language", "POST", "/contexts", `{"language":"javascript"}`, "language"},
		{"cwd past PATH_MAX", "POST", "/contexts", `{"cwd":"` + strings.Repeat("d", maxCwd+1) + `"}`, "cwd"},
		{"restart a bad id", "POST", "/contexts/ctx_1/restart", ``, "context id"},
		{"remove a bad id", "DELETE", "/contexts/..%2f..%2fexec", ``, "context id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.doJSON(tt.method, "/v1/sandboxes/sbx-1"+tt.path, key, tt.body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status: got %d, want 400", resp.StatusCode)
			}
			d := errorOf(t, resp)
			if d.Code != "invalid_request" || !strings.Contains(d.Message, tt.want) {
				t.Errorf("error: got %s %q, want invalid_request naming %q", d.Code, d.Message, tt.want)
			}
		})
	}
	if reqs := e.agent.requests(); len(reqs) != 0 {
		t.Errorf("the agent got %d requests, want none: each was refused on the host", len(reqs))
	}
}

// manyEnv is a JSON env of n entries.
func manyEnv(n int) string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("V%d", i)] = "x"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestCodeBodiesForwarded(t *testing.T) {
	e := newEnv(t, nil)
	key := e.keys[store.KeyFull]
	placeholder := e.vault.Placeholder("acct1", testSecretName)

	resp := e.doJSON("POST", "/v1/sandboxes/sbx-1/code", key, `{"code":"","context_id":"ctx_0123456789abcdef","timeout_ms":500,"env":{"A":"1"}}`)
	io.Copy(io.Discard, resp.Body)
	resp = e.doJSON("POST", "/v1/sandboxes/sbx-1/contexts", key, `{"cwd":"sub","env":{"B":"2"}}`)
	io.Copy(io.Discard, resp.Body)
	resp = e.doJSON("POST", "/v1/sandboxes/sbx-1/contexts", key, ``) // every field may be left out
	io.Copy(io.Discard, resp.Body)
	for _, p := range []string{"/contexts/default/restart", "/contexts/ctx_0123456789abcdef"} {
		method := "POST"
		if !strings.HasSuffix(p, "/restart") {
			method = "DELETE"
		}
		resp := e.do(method, "/v1/sandboxes/sbx-1"+p, key, nil)
		io.Copy(io.Discard, resp.Body)
	}
	resp = e.do("GET", "/v1/sandboxes/sbx-1/contexts", key, nil)
	io.Copy(io.Discard, resp.Body)

	reqs := e.agent.requests()
	var got []string
	for _, r := range reqs {
		got = append(got, r.Method+" "+r.Path)
	}
	want := "POST /code|POST /contexts|POST /contexts|POST /contexts/default/restart|DELETE /contexts/ctx_0123456789abcdef|GET /contexts"
	if strings.Join(got, "|") != want {
		t.Fatalf("agent requests: got %v, want %s", got, want)
	}
	var code api.CodeRequest
	if err := json.Unmarshal(reqs[0].Body, &code); err != nil {
		t.Fatal(err)
	}
	if code.Code != "" || code.ContextID != "ctx_0123456789abcdef" || code.TimeoutMs != 500 ||
		code.Env["A"] != "1" || code.Env[testSecretName] != placeholder {
		t.Errorf("agent got %+v, want the request with the secret's placeholder added", code)
	}
	for i, wantEnv := range []map[string]string{{"B": "2", testSecretName: placeholder}, {testSecretName: placeholder}} {
		var cr api.CreateContextRequest
		if err := json.Unmarshal(reqs[1+i].Body, &cr); err != nil {
			t.Fatal(err)
		}
		if len(cr.Env) != len(wantEnv) || cr.Env["B"] != wantEnv["B"] || cr.Env[testSecretName] != placeholder {
			t.Errorf("context %d: agent got env %v, want %v", i, cr.Env, wantEnv)
		}
	}
}

func TestCodeRoutesRefuseReadOnlyKeys(t *testing.T) {
	e := newEnv(t, nil)
	key := e.keys[store.KeyReadOnly]
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/code", `{"code":"1"}`},
		{"POST", "/contexts", `{}`},
		{"POST", "/contexts/default/restart", ``},
		{"DELETE", "/contexts/default", ``},
	} {
		resp := e.doJSON(r.method, "/v1/sandboxes/sbx-1"+r.path, key, r.body)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s: got %d, want 403", r.method, r.path, resp.StatusCode)
			continue
		}
		if d := errorOf(t, resp); d.Code != "forbidden" {
			t.Errorf("%s %s: got code %s, want forbidden", r.method, r.path, d.Code)
		}
	}
	if resp := e.do("GET", "/v1/sandboxes/sbx-1/contexts", key, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET contexts with a read-only key: got %d, want 200", resp.StatusCode)
	}
	for _, r := range e.agent.requests() {
		if r.Method != "GET" {
			t.Errorf("the agent got %s %s from a read-only key", r.Method, r.Path)
		}
	}
}

// TestCodeStreamGuarded: the server ends a code stream the agent broke
// off with one "error" event, and passes a result longer than an exec
// line may be.
func TestCodeStreamGuarded(t *testing.T) {
	e := newEnv(t, nil)
	events := func(code string) []api.CodeEvent {
		t.Helper()
		resp := e.doJSON("POST", "/v1/sandboxes/sbx-1/code", e.keys[store.KeyFull], `{"code":"`+code+`"}`)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("status %d %s, want 200 ndjson", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var evs []api.CodeEvent
		dec := json.NewDecoder(resp.Body)
		for {
			var ev api.CodeEvent
			if err := dec.Decode(&ev); err == io.EOF {
				return evs
			} else if err != nil {
				t.Fatalf("after %d events: %v", len(evs), err)
			}
			evs = append(evs, ev)
		}
	}
	types := func(evs []api.CodeEvent) string {
		var ts []string
		for _, ev := range evs {
			ts = append(ts, ev.Type)
		}
		return strings.Join(ts, ",")
	}

	if got := types(events("print(1)")); got != "stdout,end" {
		t.Errorf("a whole cell: got %s, want stdout,end", got)
	}
	big := events("big")
	if got := types(big); got != "stdout,result,end" || len(big[1].Result.PNG) != 1<<20 {
		t.Errorf("a big result: got %s, want stdout,result,end with the whole result", got)
	}
	broken := events("break")
	if got := types(broken); got != "stdout,error" {
		t.Fatalf("a broken stream: got %s, want stdout,error", got)
	}
	if d := broken[1].Error; d == nil || d.Code != "internal" || !strings.Contains(d.Message, "cell") {
		t.Errorf("error event: got %+v, want internal, naming the cell", d)
	}
}

// TestCodeStreamFromABadAgent: an agent's 200 that is not an event stream,
// or a line past the code stream's bound, reaches the Go client as an
// internal *APIError, never as a broken stream (*TransportError).
func TestCodeStreamFromABadAgent(t *testing.T) {
	e := newEnv(t, nil)
	c, err := client.New(client.WithBaseURL(e.url), client.WithAPIKey(e.keys[store.KeyFull]))
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"notstream", "hugeline"} {
		t.Run(code, func(t *testing.T) {
			_, err := c.RunCode(t.Context(), "sbx-1", api.CodeRequest{Code: code}, client.CodeOptions{})
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Code != "internal" || !strings.Contains(ae.Message, "agent") {
				t.Fatalf("got %T %v, want an internal *APIError naming the agent", err, err)
			}
		})
	}
	resp := e.doJSON("POST", "/v1/sandboxes/sbx-1/code", e.keys[store.KeyFull], `{"code":"notstream"}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %s, want 500 application/json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if d := errorOf(t, resp); d.Code != "internal" {
		t.Fatalf("got code %s, want internal", d.Code)
	}
}
