package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/mcptools"
	"github.com/withruntime/withruntime/internal/mcptools/mcptest"
	"github.com/withruntime/withruntime/internal/selfcall"
	"github.com/withruntime/withruntime/internal/store"
)

// mcpSession connects the Go SDK's client to e's /v1/mcp with key.
func (e *testEnv) mcpSession(key string) *mcp.ClientSession {
	e.t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(e.t.Context(), mcptest.HTTP(e.url+MCPPattern, key), nil)
	if err != nil {
		e.t.Fatalf("connecting to %s: %v", MCPPattern, err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool, failing the test on a protocol error, and returns
// its result, its text and its structured content as JSON.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string, string) {
	t.Helper()
	return mcptest.Call(t.Context(), t, cs, name, args)
}

// The tools act as the caller: its account's sandboxes, its agent, and
// another account's sandbox is not found.
func TestMCPActsAsTheCaller(t *testing.T) {
	e := newEnv(t, nil)
	cs := e.mcpSession(e.keys[store.KeyFull])
	// The newest revision the SDK speaks, as it negotiated it.
	if got, want := cs.InitializeResult().ProtocolVersion, mcp.SupportedProtocolVersions()[0]; got != want {
		t.Errorf("protocol version: got %s, want %s", got, want)
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"sandbox_create", "sandbox_list", "sandbox_exec", "sandbox_run_code", "sandbox_read_file", "sandbox_write_file", "sandbox_list_files", "sandbox_stop"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools: got %v, want %s among them", names, want)
		}
	}

	res, _, out := callTool(t, cs, "sandbox_list", map[string]any{})
	if res.IsError || !strings.Contains(out, `"id":"sbx-1"`) || strings.Contains(out, "sbx-admin") {
		t.Errorf("sandbox_list: got %v %s, want acct1's sbx-1 only", res.IsError, out)
	}
	res, text, out := callTool(t, cs, "sandbox_exec", map[string]any{"sandbox_id": "sbx-1", "command": "echo hi"})
	var exec mcptools.ExecOutput
	json.Unmarshal([]byte(out), &exec)
	if res.IsError || exec != (mcptools.ExecOutput{ExitCode: 0, Stdout: "hi\n"}) {
		t.Errorf("sandbox_exec: got %v %q %s, want exit 0 and hi", res.IsError, text, out)
	}
	reqs := e.agent.requests()
	if len(reqs) != 1 || reqs[0].Path != "/exec" || !strings.Contains(string(reqs[0].Body), `"cmd":"echo hi"`) {
		t.Errorf("agent requests: got %+v, want one exec of echo hi", reqs)
	}
	res, _, out = callTool(t, cs, "sandbox_write_file", map[string]any{"sandbox_id": "sbx-1", "path": "a.txt", "content": "hello"})
	if res.IsError || !strings.Contains(out, `"message":"wrote 5 bytes to /workspace/a.txt"`) {
		t.Errorf("sandbox_write_file: got %v %s", res.IsError, out)
	}
	res, _, out = callTool(t, cs, "sandbox_read_file", map[string]any{"sandbox_id": "sbx-1", "path": "a.txt"})
	if res.IsError || out != `{"content":"file bytes"}` {
		t.Errorf("sandbox_read_file: got %v %s, want the agent's file bytes", res.IsError, out)
	}
	for _, id := range []string{"sbx-admin", "sbx-nope"} {
		res, text, _ = callTool(t, cs, "sandbox_exec", map[string]any{"sandbox_id": id, "command": "true"})
		if !res.IsError || !strings.HasPrefix(text, "not_found: ") {
			t.Errorf("sandbox_exec in %s: got %v %q, want a not_found tool error", id, res.IsError, text)
		}
	}
	// Each tool call was a request of its own, logged as the caller's.
	if logs := e.logs.String(); !strings.Contains(logs, `"path":"/v1/sandboxes/sbx-1/exec"`) || !strings.Contains(logs, `"account":"acct1"`) {
		t.Errorf("the access log has no line of the tools' exec as acct1:\n%s", logs)
	}
}

// A read-only key reads through the tools and is refused what changes;
// no key is refused the endpoint.
func TestMCPKeyKinds(t *testing.T) {
	e := newEnv(t, nil)
	cs := e.mcpSession(e.keys[store.KeyReadOnly])
	res, _, out := callTool(t, cs, "sandbox_list", map[string]any{})
	if res.IsError || !strings.Contains(out, `"id":"sbx-1"`) {
		t.Errorf("read-only sandbox_list: got %v %s, want sbx-1", res.IsError, out)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"sandbox_create", map[string]any{}},
		{"sandbox_exec", map[string]any{"sandbox_id": "sbx-1", "command": "true"}},
		{"sandbox_write_file", map[string]any{"sandbox_id": "sbx-1", "path": "a", "content": "x"}},
		{"sandbox_stop", map[string]any{"sandbox_id": "sbx-1"}},
	} {
		res, text, _ := callTool(t, cs, c.tool, c.args)
		if !res.IsError || !strings.HasPrefix(text, "forbidden: this key is read-only") {
			t.Errorf("read-only %s: got %v %q, want a forbidden tool error", c.tool, res.IsError, text)
		}
	}
	for _, call := range e.fake.callLog() {
		if !strings.HasPrefix(call, "List ") && !strings.HasPrefix(call, "Get ") {
			t.Errorf("the manager was asked to %q for a read-only key", call)
		}
	}
	if reqs := e.agent.requests(); len(reqs) != 0 {
		t.Errorf("the agent was reached for a read-only key: %+v", reqs)
	}

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, key := range []string{"", "wr_unknown"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+MCPPattern, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusUnauthorized || errorOf(t, resp).Code != "unauthorized" {
			t.Errorf("key %q: got %d, want 401 unauthorized", key, resp.StatusCode)
		}
		resp.Body.Close()
	}
}

// selfTransport streams: an exec's start event reaches the client while
// the command still runs.
func TestSelfTransportStreams(t *testing.T) {
	e := newEnv(t, nil)
	gate := make(chan struct{})
	e.agent.mu.Lock()
	e.agent.execGate = gate
	e.agent.mu.Unlock()
	s := NewServer(Config{Sandboxes: e.fake, Store: e.store})
	hc := &http.Client{Transport: selfTransport(s)}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, mcpBaseURL+"/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":"sleep"}`))
	req.Header.Set("Authorization", "Bearer "+e.keys[store.KeyFull])
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("got %d %q, want 200 application/x-ndjson", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := bufio.NewScanner(resp.Body)
	var ev api.ExecEvent
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &ev) != nil || ev.Type != api.EventStart {
		t.Fatalf("first line: got %q, want the start event before the command ends", lines.Text())
	}
	// The agent still waits for this: had the transport buffered the
	// answer, the exec would have given up waiting (after 10 s) before the
	// start event arrived, and this send would block for good.
	gate <- struct{}{}
	var last string
	for lines.Scan() {
		last = lines.Text()
	}
	if !strings.Contains(last, `"type":"exit"`) {
		t.Errorf("last line: got %q, want the exit event", last)
	}
}

// postMCP posts body to e's /v1/mcp with key, speaking protocol revision
// version, under ctx.
func (e *testEnv) postMCP(ctx context.Context, key, version, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+MCPPattern, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", version)
	req.Header.Set("Authorization", "Bearer "+key)
	return http.DefaultClient.Do(req)
}

const execCall = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sandbox_exec","arguments":{"sandbox_id":"sbx-1","command":"echo hi"}}}`

// A batch, many tool calls under one request, is refused before any runs,
// on a revision that still has batches.
func TestMCPRefusesBatch(t *testing.T) {
	e := newEnv(t, nil)
	body := " \n[" + fmt.Sprintf(execCall, 1) + "," + fmt.Sprintf(execCall, 2) + "]"
	resp, err := e.postMCP(t.Context(), e.keys[store.KeyFull], "2025-03-26", body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if d := errorOf(t, resp); resp.StatusCode != http.StatusBadRequest || d.Code != "invalid_request" || !strings.Contains(d.Message, "batches are not supported") {
		t.Errorf("batch: got %d %+v, want 400 invalid_request saying batches are not supported", resp.StatusCode, d)
	}
	if reqs := e.agent.requests(); len(reqs) != 0 {
		t.Errorf("the agent was reached for a refused batch: %+v", reqs)
	}
	// One message still works.
	resp, err = e.postMCP(t.Context(), e.keys[store.KeyFull], "2025-03-26", fmt.Sprintf(execCall, 3))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `\"stdout\":\"hi\\n\"`) {
		t.Errorf("one message: got %d %s, want 200 and the exec's output", resp.StatusCode, b)
	}
}

// GET and DELETE of /v1/mcp are not served: 405 with Allow: POST, as MCP
// asks of a server that keeps no session and sends nothing unasked.
func TestMCPOtherMethods(t *testing.T) {
	e := newEnv(t, nil)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		resp := e.do(method, MCPPattern, e.keys[store.KeyFull], nil)
		if d := errorOf(t, resp); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" || d.Code != "invalid_request" {
			t.Errorf("%s: got %d Allow %q %+v, want 405 Allow POST", method, resp.StatusCode, resp.Header.Get("Allow"), d)
		}
		resp.Body.Close()
	}
}

// execLines returns the access log lines of e's execs in sbx-1, in order.
func (e *testEnv) execLines(t *testing.T) []map[string]any {
	var lines []map[string]any
	for _, l := range strings.Split(e.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["path"] == "/v1/sandboxes/sbx-1/exec" {
			lines = append(lines, m)
		}
	}
	return lines
}

// A client that goes away cancels its tool call's exec, on a revision
// before 2026-07-28 too, where the SDK does not tie a call to its request.
func TestMCPClientGoneCancelsCall(t *testing.T) {
	e := newEnv(t, nil)
	const version = "2025-06-18"
	// An exec run through, for its stream's length: start, output, exit.
	resp, err := e.postMCP(t.Context(), e.keys[store.KeyFull], version, fmt.Sprintf(execCall, 1))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	lines := e.execLines(t)
	if len(lines) != 1 {
		t.Fatalf("exec log lines: got %v, want one", lines)
	}
	full := lines[0]["bytes"].(float64)

	gate := make(chan struct{})
	e.agent.mu.Lock()
	e.agent.execGate = gate // holds the exec (10 s at most) unless it is canceled
	e.agent.mu.Unlock()
	defer close(gate)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		resp, err := e.postMCP(ctx, e.keys[store.KeyFull], version, fmt.Sprintf(execCall, 2))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	for len(e.agent.requests()) < 2 {
		time.Sleep(10 * time.Millisecond) // until the exec reaches the agent
	}
	cancel()
	<-done
	for len(lines) < 2 {
		time.Sleep(10 * time.Millisecond) // until the exec ends, however
		lines = e.execLines(t)
	}
	// Canceled, its stream ends in an error event after the start; run
	// through (the agent gives up waiting after 10 s), it would be the
	// first exec's stream, byte for byte.
	if got := lines[1]["bytes"].(float64); got == full {
		t.Errorf("the exec of the call whose client left sent %v bytes, those of one run through: it was not canceled", got)
	}
}

// A tool call's in-process requests count against the caller's account:
// past its share they are refused, as direct requests are.
func TestMCPSlotsBoundAnAccount(t *testing.T) {
	e := newEnv(t, nil)
	gate := make(chan struct{})
	e.agent.mu.Lock()
	e.agent.execGate = gate
	e.agent.mu.Unlock()
	defer close(gate)
	s := NewServer(Config{Sandboxes: e.fake, Store: e.store})
	slots := &mcpSlots{}
	hc := &http.Client{Transport: selfcall.Transport{Handler: slots.limit(mcpCall{account: "acct1", perAccount: 1}, admission.InProcess(s))}}
	exec := func() *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, mcpBaseURL+"/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":"sleep"}`))
		req.Header.Set("Authorization", "Bearer "+e.keys[store.KeyFull])
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	held := exec() // its exec waits at the gate
	if held.StatusCode != http.StatusOK {
		t.Fatalf("first exec: got %d, want 200", held.StatusCode)
	}
	resp := exec()
	if d := errorOf(t, resp); resp.StatusCode != http.StatusTooManyRequests || d.Code != "rate_limited" {
		t.Errorf("second exec while the first runs: got %d %+v, want 429 rate_limited", resp.StatusCode, d)
	}
	resp.Body.Close()
	e.agent.mu.Lock()
	e.agent.execGate = nil
	e.agent.mu.Unlock()
	gate <- struct{}{}
	io.Copy(io.Discard, held.Body)
	held.Body.Close()
	resp = exec() // the slot was given back
	if resp.StatusCode != http.StatusOK {
		t.Errorf("exec after the first ended: got %d, want 200", resp.StatusCode)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
