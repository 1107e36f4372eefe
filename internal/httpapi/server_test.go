package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/buildinfo"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

func TestHealthNeedsNoKey(t *testing.T) {
	e := newEnv(t, nil)
	resp := e.do("GET", "/v1/health", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d, want 200", resp.StatusCode)
	}
	var body map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body["status"] != "ok" {
		t.Errorf("body: got %v, want status ok", body)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id header")
	}
}

// isWebSocketRoute says whether rt is a WebSocket: a GET that writes (a
// terminal's keystrokes, a port forward's bytes).
func isWebSocketRoute(rt Route) bool {
	return rt.Pattern == sandboxPrefix+"/pty" || rt.Pattern == sandboxPrefix+"/port-forward/{port}"
}

func TestRouteTableShape(t *testing.T) {
	seen := map[string]bool{}
	for _, rt := range Routes() {
		key := rt.Method + " " + rt.Pattern
		if seen[key] {
			t.Errorf("%s: listed twice", key)
		}
		seen[key] = true
		// /v1/mcp's tools go through the routes of the table, which check.
		// A terminal's WebSocket is a GET that writes.
		if got, want := rt.Mutating, (rt.Method != http.MethodGet && rt.Pattern != MCPPattern) || isWebSocketRoute(rt); got != want {
			t.Errorf("%s: Mutating got %v, want %v (only GET routes only read)", key, got, want)
		}
		if got, want := rt.Public, key == "GET /v1/health" || key == "POST /v1/trial"; got != want {
			t.Errorf("%s: Public got %v, want %v", key, got, want)
		}
		if got, want := rt.Admin, strings.HasPrefix(rt.Pattern, "/v1/accounts") || strings.HasSuffix(rt.Pattern, "/publish") || rt.Pattern == "/v1/audit"; got != want {
			t.Errorf("%s: Admin got %v, want %v", key, got, want)
		}
		if rt.handler == nil {
			t.Errorf("%s: no handler", key)
		}
	}
}

func TestAuthRequiredOnEveryRoute(t *testing.T) {
	e := newEnv(t, nil)
	headers := []struct {
		name, value string
	}{
		{"missing", ""},
		{"empty bearer", "Bearer "},
		{"other scheme", "Basic " + e.keys[store.KeyFull]},
		{"unknown key", "Bearer wr_unknown"},
		{"key with a character more", "Bearer " + e.keys[store.KeyFull] + "x"},
	}
	for _, rt := range Routes() {
		if rt.Public {
			continue
		}
		for _, h := range headers {
			t.Run(rt.Method+" "+rt.Pattern+"/"+h.name, func(t *testing.T) {
				req, err := http.NewRequestWithContext(t.Context(), rt.Method, e.url+concrete(rt.Pattern), bodyFor(rt))
				if err != nil {
					t.Fatal(err)
				}
				if h.value != "" {
					req.Header.Set("Authorization", h.value)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("status: got %d, want 401", resp.StatusCode)
				}
				if got := errorOf(t, resp).Code; got != "unauthorized" {
					t.Errorf("code: got %q, want unauthorized", got)
				}
				if resp.Header.Get("WWW-Authenticate") == "" {
					t.Error("no WWW-Authenticate header")
				}
			})
		}
	}
	if calls := e.fake.callLog(); len(calls) != 0 {
		t.Errorf("the manager was called without a valid key: %v", calls)
	}
	if reqs := e.agent.requests(); len(reqs) != 0 {
		t.Errorf("the agent was reached without a valid key: %d requests", len(reqs))
	}
}

func TestKeyKinds(t *testing.T) {
	e := newEnv(t, nil)
	for _, rt := range Routes() {
		if rt.Public || rt.Pattern == MCPPattern {
			continue // /v1/mcp's keys: TestMCPKeyKinds
		}
		for _, kind := range []store.KeyKind{store.KeyReadOnly, store.KeyFull, store.KeyAdmin} {
			if kind == store.KeyAdmin && !rt.Admin {
				continue // the admin key acting as its account is tested apart
			}
			t.Run(rt.Method+" "+rt.Pattern+"/"+string(kind), func(t *testing.T) {
				before := len(e.fake.callLog())
				resp := e.do(rt.Method, concrete(rt.Pattern), e.keys[kind], bodyFor(rt))
				if (kind == store.KeyReadOnly && rt.Mutating) || (kind != store.KeyAdmin && rt.Admin) {
					if resp.StatusCode != http.StatusForbidden {
						t.Errorf("status: got %d, want 403", resp.StatusCode)
					}
					if got := errorOf(t, resp).Code; got != "forbidden" {
						t.Errorf("code: got %q, want forbidden", got)
					}
					if after := len(e.fake.callLog()); after != before {
						t.Errorf("the manager was called for a read-only key: %v", e.fake.callLog()[before:])
					}
					return
				}
				if isWebSocketRoute(rt) {
					// A plain GET is no WebSocket handshake (pty_test.go
					// opens them): refused past the key's check.
					if got := errorOf(t, resp).Code; resp.StatusCode != http.StatusBadRequest || got != "invalid_request" {
						t.Errorf("got %d %q, want 400 invalid_request", resp.StatusCode, got)
					}
					return
				}
				if resp.StatusCode/100 != 2 {
					t.Errorf("status: got %d, want 2xx", resp.StatusCode)
				}
			})
		}
	}
}

func TestAdminKeyActsAsItsAccount(t *testing.T) {
	e := newEnv(t, nil)
	resp := e.do("GET", "/v1/sandboxes/sbx-admin", e.keys[store.KeyAdmin], nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d, want 200", resp.StatusCode)
	}
	// Another account's sandbox is not found, for the admin key too.
	resp = e.do("GET", "/v1/sandboxes/sbx-1", e.keys[store.KeyAdmin], nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("other account's sandbox: got %d, want 404", resp.StatusCode)
	}
	want := []string{"Get admin sbx-admin", "Get admin sbx-1"}
	if got := e.fake.callLog(); !slices.Equal(got, want) {
		t.Errorf("calls: got %v, want %v", got, want)
	}
}

func TestErrorResponses(t *testing.T) {
	e := newEnv(t, nil)
	for _, kind := range service.Kinds() {
		status := service.Status(kind)
		t.Run(string(kind), func(t *testing.T) {
			e.fake.setErr(sandbox.Wrap(kind, errors.New("detail for the log only"), "message for "+string(kind)))
			resp := e.do("GET", "/v1/sandboxes/sbx-1", e.keys[store.KeyFull], nil)
			if resp.StatusCode != status {
				t.Errorf("status: got %d, want %d", resp.StatusCode, status)
			}
			d := errorOf(t, resp)
			if d.Code != string(kind) {
				t.Errorf("code: got %q, want %q", d.Code, kind)
			}
			if want := "message for " + string(kind); d.Message != want {
				t.Errorf("message: got %q, want %q", d.Message, want)
			}
		})
	}

	tests := []struct {
		name     string
		err      error
		wantCode string
		wantMsg  string
	}{
		{"plain error", errors.New("disk on fire under /var/lib/secret"), "internal", "internal error"},
		{"wrapped plain error", fmt.Errorf("reading state: %w", errors.New("disk on fire under /var/lib/secret")), "internal", "internal error"},
		{"unknown kind", &sandbox.Error{Kind: "made_up", Message: "disk on fire under /var/lib/secret"}, "internal", "internal error"},
		{"sentinel without message", sandbox.ErrConflict, "conflict", "conflict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.fake.setErr(tt.err)
			resp := e.do("GET", "/v1/sandboxes/sbx-1", e.keys[store.KeyFull], nil)
			d := errorOf(t, resp)
			if d.Code != tt.wantCode || d.Message != tt.wantMsg {
				t.Errorf("got %+v, want code %q message %q", d, tt.wantCode, tt.wantMsg)
			}
			if resp.StatusCode != service.Status(sandbox.Kind(tt.wantCode)) {
				t.Errorf("status: got %d, want %d", resp.StatusCode, service.Status(sandbox.Kind(tt.wantCode)))
			}
		})
	}

	// The detail the client never sees is in the log, beside the sandbox.
	var found bool
	for _, l := range e.logs.lines(t) {
		if strings.Contains(fmt.Sprint(l["error"]), "disk on fire") && l["sandbox_id"] == "sbx-1" {
			found = true
		}
	}
	if !found {
		t.Errorf("no log line with the internal error and sandbox_id sbx-1:\n%s", e.logs.String())
	}
}

func TestUnknownRoute(t *testing.T) {
	e := newEnv(t, nil)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/nothing"},
		{"GET", "/"},
		{"PATCH", "/v1/sandboxes/sbx-1"},
		{"GET", "/v1/sandboxes/sbx-1/stop"},
	} {
		resp := e.do(tt.method, tt.path, e.keys[store.KeyFull], nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: got %d, want 404", tt.method, tt.path, resp.StatusCode)
		}
		if got := errorOf(t, resp).Code; got != "not_found" {
			t.Errorf("%s %s: code got %q, want not_found", tt.method, tt.path, got)
		}
	}
}

func TestSandboxRoutes(t *testing.T) {
	e := newEnv(t, nil)
	key := e.keys[store.KeyFull]
	tests := []struct {
		method, path, body string
		wantStatus         int
		wantState          string
		wantCall           string
	}{
		{"POST", "/v1/sandboxes", `{"vcpus":1,"env":{"K":"v"}}`, 201, "running", "Create acct1"},
		{"POST", "/v1/sandboxes", ``, 201, "running", "Create acct1"},
		{"POST", "/v1/sandboxes", "{}\n\t ", 201, "running", "Create acct1"},
		{"GET", "/v1/sandboxes/sbx-1", ``, 200, "running", "Get acct1 sbx-1"},
		{"DELETE", "/v1/sandboxes/sbx-1", ``, 200, "ended", "Stop acct1 sbx-1"},
		{"POST", "/v1/sandboxes/sbx-1/stop", ``, 200, "ended", "Stop acct1 sbx-1"},
		{"POST", "/v1/sandboxes/sbx-1/pause", ``, 200, "paused", "Pause acct1 sbx-1"},
		{"POST", "/v1/sandboxes/sbx-1/resume", ``, 200, "running", "Resume acct1 sbx-1"},
		{"POST", "/v1/sandboxes/sbx-1/extend", `{"timeout_seconds":600}`, 200, "running", "Extend acct1 sbx-1"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			before := len(e.fake.callLog())
			resp := e.doJSON(tt.method, tt.path, key, tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status: got %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			var sb api.Sandbox
			dec := json.NewDecoder(resp.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&sb); err != nil {
				t.Fatal(err)
			}
			if sb.State != tt.wantState {
				t.Errorf("state: got %q, want %q", sb.State, tt.wantState)
			}
			if calls := e.fake.callLog()[before:]; !slices.Equal(calls, []string{tt.wantCall}) {
				t.Errorf("calls: got %v, want [%s]", calls, tt.wantCall)
			}
		})
	}

	resp := e.do("GET", "/v1/sandboxes", key, nil)
	var list api.SandboxList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Sandboxes) != 4 { // sbx-1 and the three made above
		t.Errorf("list: got %d sandboxes, want 4", len(list.Sandboxes))
	}
}

func TestSandboxViewHidesEnv(t *testing.T) {
	e := newEnv(t, nil)
	resp := e.do("GET", "/v1/sandboxes/sbx-1", e.keys[store.KeyReadOnly], nil)
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(raw)
	if strings.Contains(string(b), "env-secret-value") || raw["env"] != nil {
		t.Errorf("environment shown: %s", b)
	}
	if got, want := fmt.Sprint(raw["network"]), "map[internet:false]"; got != want {
		t.Errorf("network: got %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(raw["metadata"]), "map[task:t1]"; got != want {
		t.Errorf("metadata: got %s, want %s", got, want)
	}
}

func TestAccessLog(t *testing.T) {
	e := newEnv(t, nil)
	key := e.keys[store.KeyFull]
	resp := e.do("GET", "/v1/sandboxes/sbx-1/files?path=secret-name.txt", key, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d, want 200", resp.StatusCode)
	}
	reqID := resp.Header.Get("X-Request-Id")
	io.Copy(io.Discard, resp.Body)
	resp = e.do("GET", "/v1/sandboxes", "wr_wrong_key", nil)
	io.Copy(io.Discard, resp.Body)
	// The line is written once the handler returns, which can be after the
	// client has read the whole answer.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if n := strings.Count(e.logs.String(), `"msg":"request"`); n >= 2 {
			break
		}
	}

	logs := e.logs.String()
	for _, secret := range []string{key, "wr_wrong_key", "Bearer", "secret-name.txt"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log holds %q:\n%s", secret, logs)
		}
	}
	var line map[string]any
	for _, l := range e.logs.lines(t) {
		if l["request_id"] == reqID {
			line = l
		}
	}
	if line == nil {
		t.Fatalf("no log line with request_id %s:\n%s", reqID, logs)
	}
	want := map[string]any{
		"msg": "request", "method": "GET", "path": "/v1/sandboxes/sbx-1/files",
		"status": float64(200), "sandbox_id": "sbx-1", "account": "acct1",
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("log %s: got %v, want %v", k, line[k], v)
		}
	}
	if _, ok := line["duration"]; !ok {
		t.Errorf("log line has no duration: %v", line)
	}
	// The agent got the same request id.
	reqs := e.agent.requests()
	if len(reqs) != 1 || reqs[0].Header.Get("X-Request-Id") != reqID {
		t.Errorf("agent request id: got %v, want %s", reqs, reqID)
	}
}

// panickyGet is a manager whose Get panics.
type panickyGet struct{ *fakeSandboxes }

func (panickyGet) Get(ctx context.Context, account, id string) (*sandbox.Record, error) {
	panic("manager bug with private detail")
}

func TestPanicIsAnInternalError(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Sandboxes = panickyGet{c.Sandboxes.(*fakeSandboxes)} })
	resp := e.do("GET", "/v1/sandboxes/sbx-1", e.keys[store.KeyFull], nil)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("status: got %d, want 500", resp.StatusCode)
	}
	if d := errorOf(t, resp); d.Code != "internal" || d.Message != "internal error" {
		t.Errorf("got %+v, want internal: internal error", d)
	}
	if !strings.Contains(e.logs.String(), "manager bug with private detail") {
		t.Errorf("the panic is not in the log:\n%s", e.logs.String())
	}
	// The server still answers.
	if resp := e.do("GET", "/v1/health", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("health after a panic: got %d, want 200", resp.StatusCode)
	}
}

// /v1/health reports the build's version, as "withruntime version" does.
func TestHealthVersion(t *testing.T) {
	e := newEnv(t, nil)
	resp := e.do("GET", "/v1/health", "", nil)
	var body map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body["status"] != "ok" || body["version"] != buildinfo.Version("") || body["version"] == "" {
		t.Errorf("health: got %v, want status ok and version %q", body, buildinfo.Version(""))
	}
}
