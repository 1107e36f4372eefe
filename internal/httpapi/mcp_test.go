package httpapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/mcptools"
	"github.com/withruntime/withruntime/internal/store"
)

// bearerTransport sends every request with key.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the Go SDK's client to e's /v1/mcp with key.
func (e *testEnv) mcpSession(key string) *mcp.ClientSession {
	e.t.Helper()
	t := &mcp.StreamableClientTransport{Endpoint: e.url + MCPPattern, HTTPClient: &http.Client{Transport: bearerTransport{key}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(e.t.Context(), t, nil)
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
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	b, _ := json.Marshal(res.StructuredContent)
	return res, text.String(), string(b)
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
