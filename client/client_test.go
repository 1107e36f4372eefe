package client

// The HTTP servers in these tests are fakes that speak the wire contract of
// package api, so that the client is tested without the real server
// (internal/httpapi); the end-to-end tests (test/e2e) run it against that.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

const testKey = "wr_test_key"

// newTestClient serves h and returns a client of it.
func newTestClient(t *testing.T, h http.Handler) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(WithBaseURL(srv.URL), WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg}})
}

// closedURL returns the address of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestNewReadsEnvironment(t *testing.T) {
	t.Setenv(EnvBaseURL, "https://runtime.example.org/prefix/")
	t.Setenv(EnvAPIKey, "k1")
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.BaseURL(), "https://runtime.example.org/prefix"; got != want {
		t.Errorf("base URL: got %q, want %q", got, want)
	}
	if c.apiKey != "k1" {
		t.Errorf("key: got %q, want %q", c.apiKey, "k1")
	}
	c, err = New(WithBaseURL("http://10.0.0.1:9"), WithAPIKey("k2"))
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != "http://10.0.0.1:9" || c.apiKey != "k2" {
		t.Errorf("options did not override the environment: %q %q", c.BaseURL(), c.apiKey)
	}

	t.Setenv(EnvBaseURL, "")
	c, err = New()
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != DefaultBaseURL {
		t.Errorf("default base URL: got %q, want %q", c.BaseURL(), DefaultBaseURL)
	}
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"127.0.0.1:7878", "ftp://host", "http://", "http://h/?q=1", "://x"} {
		if _, err := New(WithBaseURL(u)); err == nil {
			t.Errorf("New(WithBaseURL(%q)): got no error", u)
		}
	}
}

func TestRequestHeadersAndBody(t *testing.T) {
	var got api.CreateSandboxRequest
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/sandboxes" {
			writeError(w, 404, "not_found", "no route "+r.Method+" "+r.URL.Path)
			return
		}
		if a := r.Header.Get("Authorization"); a != "Bearer "+testKey {
			writeError(w, 401, "unauthorized", "got "+a)
			return
		}
		if ua := r.Header.Get("User-Agent"); ua != "test-agent/1" {
			writeError(w, 400, "invalid_request", "user agent "+ua)
			return
		}
		json.NewDecoder(r.Body).Decode(&got)
		writeJSON(w, 201, api.Sandbox{ID: "sbx_1", State: "running", VCPUs: got.VCPUs})
	}))
	WithUserAgent("test-agent/1")(c)
	s, err := c.CreateSandbox(t.Context(), api.CreateSandboxRequest{VCPUs: 1, TimeoutSeconds: 900, Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != "sbx_1" || s.VCPUs != 1 {
		t.Errorf("got %+v", s)
	}
	if got.TimeoutSeconds != 900 || got.Env["A"] != "1" {
		t.Errorf("server got %+v", got)
	}
}

func TestSandboxRoutes(t *testing.T) {
	var calls []string
	mux := http.NewServeMux()
	sbx := func(state string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			calls = append(calls, r.Method+" "+r.URL.Path)
			writeJSON(w, 200, api.Sandbox{ID: r.PathValue("id"), State: state})
		}
	}
	mux.HandleFunc("GET /v1/sandboxes/{id}", sbx("running"))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", sbx("ended"))
	mux.HandleFunc("POST /v1/sandboxes/{id}/pause", sbx("paused"))
	mux.HandleFunc("POST /v1/sandboxes/{id}/resume", sbx("running"))
	mux.HandleFunc("POST /v1/sandboxes/{id}/extend", func(w http.ResponseWriter, r *http.Request) {
		var req api.ExtendRequest
		json.NewDecoder(r.Body).Decode(&req)
		calls = append(calls, r.Method+" "+r.URL.Path)
		writeJSON(w, 200, api.Sandbox{ID: r.PathValue("id"), LeaseEndsAt: time.Unix(int64(req.TimeoutSeconds), 0)})
	})
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.SandboxList{Sandboxes: []api.Sandbox{{ID: "a"}, {ID: "b"}}})
	})
	c := newTestClient(t, mux)
	ctx := t.Context()

	tests := []struct {
		name      string
		call      func() (*api.Sandbox, error)
		wantState string
	}{
		{"get", func() (*api.Sandbox, error) { return c.GetSandbox(ctx, "s1") }, "running"},
		{"stop", func() (*api.Sandbox, error) { return c.StopSandbox(ctx, "s1") }, "ended"},
		{"pause", func() (*api.Sandbox, error) { return c.PauseSandbox(ctx, "s1") }, "paused"},
		{"resume", func() (*api.Sandbox, error) { return c.ResumeSandbox(ctx, "s1") }, "running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.call()
			if err != nil {
				t.Fatal(err)
			}
			if s.ID != "s1" || s.State != tt.wantState {
				t.Errorf("got %s %s, want s1 %s", s.ID, s.State, tt.wantState)
			}
		})
	}
	s, err := c.ExtendSandbox(ctx, "s1", 600)
	if err != nil {
		t.Fatal(err)
	}
	if s.LeaseEndsAt.Unix() != 600 {
		t.Errorf("extend sent %d seconds, want 600", s.LeaseEndsAt.Unix())
	}
	l, err := c.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 {
		t.Errorf("list: got %d sandboxes, want 2", len(l))
	}
	want := "GET /v1/sandboxes/s1,DELETE /v1/sandboxes/s1,POST /v1/sandboxes/s1/pause,POST /v1/sandboxes/s1/resume,POST /v1/sandboxes/s1/extend"
	if got := strings.Join(calls, ","); got != want {
		t.Errorf("calls: got %s, want %s", got, want)
	}
	if _, err := c.GetSandbox(ctx, ""); err == nil {
		t.Error("empty id: got no error")
	}
}

func TestAPIErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		wantCode   string
		wantMsg    string
		wantTarget error
	}{
		{"not found", 404, `{"error":{"code":"not_found","message":"no sandbox sbx_x"}}`, "not_found", "no sandbox sbx_x", ErrNotFound},
		{"lease ended", 409, `{"error":{"code":"lease_ended","message":"the lease ended"}}`, "lease_ended", "the lease ended", ErrLeaseEnded},
		{"conflict", 409, `{"error":{"code":"conflict","message":"paused"}}`, "conflict", "paused", ErrConflict},
		{"spending", 402, `{"error":{"code":"spending_limit_reached","message":"limit"}}`, "spending_limit_reached", "limit", ErrSpendingLimitReached},
		{"max cost", 402, `{"error":{"code":"max_cost_exceeded","message":"m"}}`, "max_cost_exceeded", "m", ErrMaxCostExceeded},
		{"trial", 402, `{"error":{"code":"trial_exhausted","message":"m"}}`, "trial_exhausted", "m", ErrTrialExhausted},
		{"concurrency", 429, `{"error":{"code":"concurrency_limit_reached","message":"m"}}`, "concurrency_limit_reached", "m", ErrConcurrencyLimitReached},
		{"rate", 429, `{"error":{"code":"rate_limited","message":"m"}}`, "rate_limited", "m", ErrRateLimited},
		{"capacity", 503, `{"error":{"code":"capacity_exhausted","message":"m"}}`, "capacity_exhausted", "m", ErrCapacityExhausted},
		{"not supported", 422, `{"error":{"code":"not_supported","message":"m"}}`, "not_supported", "m", ErrNotSupported},
		{"too large", 413, `{"error":{"code":"payload_too_large","message":"m"}}`, "payload_too_large", "m", ErrPayloadTooLarge},
		{"forbidden", 403, `{"error":{"code":"forbidden","message":"read-only key"}}`, "forbidden", "read-only key", ErrForbidden},
		{"unauthorized", 401, `{"error":{"code":"unauthorized","message":"m"}}`, "unauthorized", "m", ErrUnauthorized},
		{"invalid", 400, `{"error":{"code":"invalid_request","message":"m"}}`, "invalid_request", "m", ErrInvalidRequest},
		{"internal", 500, `{"error":{"code":"internal","message":"internal error"}}`, "internal", "internal error", ErrInternal},
		{"plain text 404", 404, "404 page not found\n", "not_found", "404 page not found", ErrNotFound},
		{"html 502", 502, "<html><body>Bad Gateway</body></html>", "internal", "bad gateway", ErrInternal},
		{"empty 401", 401, "", "unauthorized", "unauthorized", ErrUnauthorized},
		{"json without code", 409, `{"message":"x"}`, "conflict", `{"message":"x"}`, ErrConflict},
		{"unknown 418", 418, "", "invalid_request", "i'm a teapot", ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			_, err := c.GetSandbox(t.Context(), "sbx_x")
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("got %T %v, want *APIError", err, err)
			}
			if ae.Code != tt.wantCode || ae.Status != tt.status || ae.Message != tt.wantMsg {
				t.Errorf("got {%s %d %q}, want {%s %d %q}", ae.Code, ae.Status, ae.Message, tt.wantCode, tt.status, tt.wantMsg)
			}
			if !errors.Is(err, tt.wantTarget) {
				t.Errorf("errors.Is(err, %v) = false", tt.wantTarget)
			}
			other := ErrNotFound
			if tt.wantTarget == ErrNotFound {
				other = ErrConflict
			}
			if errors.Is(err, other) {
				t.Errorf("errors.Is(err, %v) = true, want false", other)
			}
			var te *TransportError
			if errors.As(err, &te) {
				t.Error("an API error is also a TransportError")
			}
		})
	}
}

func TestUnreachableIsTransportError(t *testing.T) {
	c, err := New(WithBaseURL(closedURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListSandboxes(t.Context())
	var te *TransportError
	if !errors.As(err, &te) {
		t.Fatalf("got %T %v, want *TransportError", err, err)
	}
	if !strings.HasPrefix(te.Op, "GET http://127.0.0.1:") {
		t.Errorf("op: got %q", te.Op)
	}
	var ae *APIError
	if errors.As(err, &ae) {
		t.Error("a transport error is also an APIError")
	}
}

func TestContextEndIsNotTransportError(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := c.Health(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	var te *TransportError
	if errors.As(err, &te) {
		t.Error("a context's end is reported as a TransportError")
	}
}

func TestHealth(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/health" {
			writeError(w, 404, "not_found", r.URL.Path)
			return
		}
		writeJSON(w, 200, map[string]string{"status": "ok"})
	}))
	if err := c.Health(t.Context()); err != nil {
		t.Fatal(err)
	}
}
