package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

func TestExecStreamsIncrementally(t *testing.T) {
	e := newEnv(t, nil)
	gate := make(chan struct{})
	e.agent.mu.Lock()
	e.agent.execGate = gate
	e.agent.mu.Unlock()
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()

	// The request runs beside the test: the answer's header alone must not
	// wait for the command either.
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		req, _ := http.NewRequestWithContext(t.Context(), "POST", e.url+"/v1/sandboxes/sbx-1/exec",
			strings.NewReader(`{"cmd":["python3","-c","print(1)"]}`))
		req.Header.Set("Authorization", "Bearer "+e.keys[store.KeyFull])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("exec: %v", err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status: got %d, want 200", resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Type"); got != "application/x-ndjson" {
			t.Errorf("Content-Type: got %q, want application/x-ndjson", got)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	// The agent holds the rest of the stream until the first event is
	// read: a server that buffered would never deliver it.
	select {
	case l := <-lines:
		var ev api.ExecEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Type != api.EventStart {
			t.Fatalf("first line: got %q (%v), want a start event", l, err)
		}
	case <-time.After(5 * time.Second):
		close(gate)
		for range lines {
		}
		t.Fatal("no start event while the command runs: the stream is buffered")
	}
	close(gate)
	var types []string
	for l := range lines {
		var ev api.ExecEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		types = append(types, ev.Type)
	}
	if got, want := strings.Join(types, ","), "stdout,exit"; got != want {
		t.Errorf("events after start: got %s, want %s", got, want)
	}
}

func TestForwardPreservesPathAndQuery(t *testing.T) {
	e := newEnv(t, nil)
	key := e.keys[store.KeyFull]
	tests := []struct {
		method, path string
		body         string
		wantPath     string
		wantQuery    string
	}{
		{"GET", "/v1/sandboxes/sbx-1/files?path=dir%2Fa%20b.txt&x=%C3%A9", "", "/files", "path=dir%2Fa%20b.txt&x=%C3%A9"},
		{"PUT", "/v1/sandboxes/sbx-1/files?path=a.txt&mode=0600", "some\x00binary\xffbytes", "/files", "path=a.txt&mode=0600"},
		{"DELETE", "/v1/sandboxes/sbx-1/files?path=d&recursive=true", "", "/files", "path=d&recursive=true"},
		{"GET", "/v1/sandboxes/sbx-1/files/list?path=.", "", "/files/list", "path=."},
		{"GET", "/v1/sandboxes/sbx-1/files/stat?path=%2Fetc%2Fhosts", "", "/files/stat", "path=%2Fetc%2Fhosts"},
		{"POST", "/v1/sandboxes/sbx-1/files/mkdir?path=a/b/c", "", "/files/mkdir", "path=a/b/c"},
		{"GET", "/v1/sandboxes/sbx-1/archive?path=src", "", "/archive", "path=src"},
		{"PUT", "/v1/sandboxes/sbx-1/archive?path=dst", "tar bytes", "/archive", "path=dst"},
		{"GET", "/v1/sandboxes/sbx-1/processes", "", "/processes", ""},
		{"GET", "/v1/sandboxes/sbx-1/processes/42?wait=true&timeout_ms=500", "", "/processes/42", "wait=true&timeout_ms=500"},
		{"POST", "/v1/sandboxes/sbx-1/processes/42/kill", "", "/processes/42/kill", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			n := len(e.agent.requests())
			req, err := http.NewRequestWithContext(t.Context(), tt.method, e.url+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Cookie", "session=1")
			req.Header.Set("X-Request-Id", "client-chosen")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status: got %d, want 200", resp.StatusCode)
			}
			reqs := e.agent.requests()[n:]
			if len(reqs) != 1 {
				t.Fatalf("agent got %d requests, want 1", len(reqs))
			}
			got := reqs[0]
			if got.Method != tt.method || got.Path != tt.wantPath || got.RawQuery != tt.wantQuery {
				t.Errorf("agent got %s %s ? %s, want %s %s ? %s", got.Method, got.Path, got.RawQuery, tt.method, tt.wantPath, tt.wantQuery)
			}
			if tt.method == "PUT" && string(got.Body) != tt.body {
				t.Errorf("body: got %q, want %q", got.Body, tt.body)
			}
			for _, h := range []string{"Authorization", "Cookie"} {
				if v := got.Header.Get(h); v != "" {
					t.Errorf("agent got %s header %q", h, v)
				}
			}
			if id := got.Header.Get("X-Request-Id"); id != resp.Header.Get("X-Request-Id") || id == "client-chosen" {
				t.Errorf("agent X-Request-Id: got %q, want the server's %q", id, resp.Header.Get("X-Request-Id"))
			}
		})
	}
}

func TestExecBodyForwarded(t *testing.T) {
	e := newEnv(t, nil)
	body := `{"cmd":"echo $A","cwd":"sub","env":{"A":"1"},"stdin":"in","timeout_ms":500}`
	resp := e.doJSON("POST", "/v1/sandboxes/sbx-1/exec", e.keys[store.KeyFull], body)
	io.Copy(io.Discard, resp.Body)
	reqs := e.agent.requests()
	if len(reqs) != 1 || reqs[0].Path != "/exec" {
		t.Fatalf("agent requests: got %+v, want one POST /exec", reqs)
	}
	var got, want api.ExecRequest
	json.Unmarshal([]byte(body), &want)
	// The account's secrets come in as placeholders.
	want.Env[testSecretName] = e.vault.Placeholder("acct1", testSecretName)
	if err := json.Unmarshal(reqs[0].Body, &got); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("agent got %+v, want %+v", got, want)
	}
}

func TestExecOnSandboxNotRunning(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.add("sbx-paused", "acct1", sandbox.StatePaused)
	ended := e.fake.add("sbx-lease", "acct1", sandbox.StateEnded)
	ended.EndReason = sandbox.EndLeaseEnded
	tests := []struct {
		id         string
		wantStatus int
		wantCode   string
	}{
		{"sbx-paused", 409, "conflict"},
		{"sbx-lease", 409, "lease_ended"},
		{"sbx-nope", 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			resp := e.doJSON("POST", "/v1/sandboxes/"+tt.id+"/exec", e.keys[store.KeyFull], `{"cmd":"ls"}`)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status: got %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := errorOf(t, resp).Code; got != tt.wantCode {
				t.Errorf("code: got %q, want %q", got, tt.wantCode)
			}
		})
	}
	if n := len(e.agent.requests()); n != 0 {
		t.Errorf("agent reached %d times, want 0", n)
	}
}

func TestAgentUnreachable(t *testing.T) {
	e := newEnv(t, nil)
	// An address nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	e.fake.mu.Lock()
	e.fake.agentAddr = dead
	lease := e.fake.recs["sbx-1"].LeaseEndsAt
	e.fake.recs["sbx-1"].LeaseEndsAt = time.Now().Add(time.Hour)
	e.fake.mu.Unlock()

	resp := e.doJSON("POST", "/v1/sandboxes/sbx-1/exec", e.keys[store.KeyFull], `{"cmd":"ls"}`)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("status: got %d, want 500", resp.StatusCode)
	}
	d := errorOf(t, resp)
	if d.Code != "internal" || d.Message != "could not reach the sandbox's agent" {
		t.Errorf("got %+v, want internal: could not reach the sandbox's agent", d)
	}
	if strings.Contains(d.Message, dead) {
		t.Errorf("message leaks the agent's address: %q", d.Message)
	}

	// The lease runs out between Agent and the round trip.
	e.fake.mu.Lock()
	e.fake.afterAgent = func(r *sandbox.Record) {
		r.State, r.EndReason = sandbox.StateEnded, sandbox.EndLeaseEnded
	}
	e.fake.mu.Unlock()
	resp = e.do("GET", "/v1/sandboxes/sbx-1/files?path=a", e.keys[store.KeyReadOnly], nil)
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("status: got %d, want 409", resp.StatusCode)
	}
	if got := errorOf(t, resp).Code; got != "lease_ended" {
		t.Errorf("code: got %q, want lease_ended", got)
	}
	// A lease already over while its stop is not yet recorded (the
	// reaper is ending it): lease_ended, not internal.
	e.fake.mu.Lock()
	e.fake.recs["sbx-1"].LeaseEndsAt = lease
	e.fake.mu.Unlock()
	resp = e.doJSON("POST", "/v1/sandboxes/sbx-1/exec", e.keys[store.KeyFull], `{"cmd":"ls"}`)
	if d := errorOf(t, resp); d.Code != "lease_ended" {
		t.Errorf("lease over: got %+v, want lease_ended", d)
	}
}

func TestBrokenAgentStreamBreaksTheResponse(t *testing.T) {
	e := newEnv(t, nil)
	resp := e.do("GET", "/v1/sandboxes/sbx-1/files?path=a&broken=1", e.keys[store.KeyFull], nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d, want 200", resp.StatusCode)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil {
		t.Errorf("read %d bytes and a clean end, want an error: a cut stream must not look complete", n)
	}
}

func TestFileUploadLimit(t *testing.T) {
	t.Run("Content-Length over api.MaxFileBody", func(t *testing.T) {
		e := newEnv(t, nil)
		// A raw connection: the header announces more than the limit and
		// no body follows, so the answer can only come from the header.
		u := strings.TrimPrefix(e.url, "http://")
		conn, err := net.Dial("tcp", u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "PUT /v1/sandboxes/sbx-1/files?path=big HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
			u, e.keys[store.KeyFull], api.MaxFileBody+1)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status: got %d, want 413", resp.StatusCode)
		}
		if got := errorOf(t, resp).Code; got != "payload_too_large" {
			t.Errorf("code: got %q, want payload_too_large", got)
		}
		if n := len(e.agent.requests()); n != 0 {
			t.Errorf("agent reached %d times, want 0", n)
		}
		if calls := e.fake.callLog(); len(calls) != 0 {
			t.Errorf("manager called: %v", calls)
		}
	})

	const limit = 4096
	e := newEnv(t, func(c *Config) { c.MaxFileBytes = limit })
	tests := []struct {
		name       string
		body       io.Reader
		wantStatus int
	}{
		{"at the limit", bytes.NewReader(make([]byte, limit)), 200},
		{"at the limit, chunked", chunked{bytes.NewReader(make([]byte, limit))}, 200},
		{"over, Content-Length", bytes.NewReader(make([]byte, limit+1)), 413},
		{"over, chunked", chunked{bytes.NewReader(make([]byte, 4*limit))}, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.do("PUT", "/v1/sandboxes/sbx-1/files?path=f", e.keys[store.KeyFull], tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status: got %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if tt.wantStatus == 413 {
				if got := errorOf(t, resp).Code; got != "payload_too_large" {
					t.Errorf("code: got %q, want payload_too_large", got)
				}
			}
		})
	}
	// Archives are bounded by the sandbox's disk, not by the file limit.
	resp := e.do("PUT", "/v1/sandboxes/sbx-1/archive?path=d", e.keys[store.KeyFull], chunked{bytes.NewReader(make([]byte, 4*limit))})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("archive over the file limit: got %d, want 200", resp.StatusCode)
	}
}

// TestLargeOutputStreams sends 1 GiB from the agent through the server and
// checks that the heap does not grow with it.
func TestLargeOutputStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 1 GiB; skipped in -short")
	}
	const size = 1 << 30
	e := newEnv(t, nil)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	start := time.Now()
	resp := e.do("GET", fmt.Sprintf("/v1/sandboxes/sbx-1/files?path=big&size=%d", size), e.keys[store.KeyFull], nil)
	n, err := io.Copy(io.Discard, resp.Body)
	close(done)
	<-sampled
	if err != nil {
		t.Fatalf("after %d bytes: %v", n, err)
	}
	if n != size {
		t.Errorf("got %d bytes, want %d", n, size)
	}
	growth := int64(peak.Load()) - int64(base)
	t.Logf("1 GiB in %v; heap in use grew by at most %d KiB", time.Since(start).Round(time.Millisecond), growth>>10)
	if growth > 64<<20 {
		t.Errorf("heap grew by %d MiB while streaming, want under 64 MiB", growth>>20)
	}
}
