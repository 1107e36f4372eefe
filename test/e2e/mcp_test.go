package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/mcptools"
	"github.com/withruntime/withruntime/internal/mcptools/mcptest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestMCP drives the MCP tools with the Go SDK's client against a real
// server and real sandboxes, over stdio ("withruntime mcp" as a
// subprocess) and over HTTP (/v1/mcp), and holds /v1/mcp to the caller's
// key.
func TestMCP(t *testing.T) {
	s := testenv.StartServer(t)
	c := newClient(t, s, s.Key)

	t.Run("stdio", func(t *testing.T) {
		cmd := exec.Command(testenv.CLI(t), "mcp")
		cmd.Env = s.Env()
		cs := mcpConnect(t, &mcp.CommandTransport{Command: cmd})
		exerciseMCP(t, cs)
	})
	t.Run("http", func(t *testing.T) {
		cs := mcpConnect(t, mcpHTTP(s, s.Key))
		exerciseMCP(t, cs)
	})
	t.Run("http keys", func(t *testing.T) {
		ro, err := c.CreateKey(t.Context(), api.CreateKeyRequest{Kind: "read_only"})
		if err != nil {
			t.Fatal(err)
		}
		sb := mustCreate(t, c, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, TimeoutSeconds: 600})
		cs := mcpConnect(t, mcpHTTP(s, ro.Secret))
		res, _, out := mcpCall(t, cs, "sandbox_list", map[string]any{})
		if res.IsError || !strings.Contains(out, `"id":"`+sb.ID+`"`) {
			t.Errorf("read-only sandbox_list: got %v %s, want %s in it", res.IsError, out, sb.ID)
		}
		for tool, args := range map[string]map[string]any{
			"sandbox_create":     {},
			"sandbox_exec":       {"sandbox_id": sb.ID, "command": "touch /workspace/ro"},
			"sandbox_write_file": {"sandbox_id": sb.ID, "path": "ro", "content": "x"},
			"sandbox_run_code":   {"sandbox_id": sb.ID, "code": "open('ro', 'w')"},
			"sandbox_stop":       {"sandbox_id": sb.ID},
		} {
			res, text, _ := mcpCall(t, cs, tool, args)
			if !res.IsError || !strings.HasPrefix(text, "forbidden: ") {
				t.Errorf("read-only %s: got %v %q, want a forbidden tool error", tool, res.IsError, text)
			}
		}
		if out := mustExec(t, c, sb.ID, "ls /workspace; echo end"); out != "end\n" {
			t.Errorf("the sandbox after the read-only key's calls: got %q in /workspace, want nothing", out)
		}
		code, body := call(t, s, "", http.MethodPost, "/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if code != http.StatusUnauthorized || errorCode(body) != "unauthorized" {
			t.Errorf("no key: got %d %s, want 401 unauthorized", code, body)
		}
	})
}

// exerciseMCP checks the tools over one session: their names and required
// parameters, then a sandbox's life through them.
func exerciseMCP(t *testing.T, cs *mcp.ClientSession) {
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRequired := map[string][]string{
		"sandbox_create": nil, "sandbox_list": nil,
		"sandbox_exec": {"command", "sandbox_id"}, "sandbox_run_code": {"code", "sandbox_id"},
		"sandbox_read_file": {"path", "sandbox_id"}, "sandbox_write_file": {"content", "path", "sandbox_id"},
		"sandbox_list_files": {"sandbox_id"}, "sandbox_stop": {"sandbox_id"},
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct{ Required []string }
		json.Unmarshal(b, &schema)
		slices.Sort(schema.Required)
		if want, ok := wantRequired[tool.Name]; ok && !slices.Equal(schema.Required, want) {
			t.Errorf("%s: required got %v, want %v", tool.Name, schema.Required, want)
		}
	}
	for name := range wantRequired {
		if !slices.Contains(names, name) {
			t.Errorf("tools: got %v, want %s among them", names, name)
		}
	}

	// The isolation goes to the server, which checks it.
	if res, text, _ := mcpCall(t, cs, "sandbox_create", map[string]any{"isolation": "bogus"}); !res.IsError || !strings.HasPrefix(text, "invalid_request: ") {
		t.Errorf("sandbox_create with isolation bogus: got %v %q, want an invalid_request tool error", res.IsError, text)
	}
	var created mcptools.CreateOutput
	res, text, out := mcpCall(t, cs, "sandbox_create", map[string]any{"vcpus": 1, "memory_mib": 1024, "timeout_seconds": 600, "isolation": "gvisor"})
	if res.IsError || json.Unmarshal([]byte(out), &created) != nil || created.ID == "" || created.Sandbox.State != "running" || created.Sandbox.Isolation != "gvisor" {
		t.Fatalf("sandbox_create: got %v %q %s, want a running gvisor sandbox's id", res.IsError, text, out)
	}
	id := created.ID
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			mcpCall(t, cs, "sandbox_stop", map[string]any{"sandbox_id": id})
		}
	})

	res, _, out = mcpCall(t, cs, "sandbox_list", map[string]any{})
	if res.IsError || !strings.Contains(out, `"id":"`+id+`"`) {
		t.Errorf("sandbox_list: got %v %s, want %s in it", res.IsError, out, id)
	}

	// A fork goes on with the source's files and has its own from then on.
	mcpCall(t, cs, "sandbox_write_file", map[string]any{"sandbox_id": id, "path": "before-fork.txt", "content": "source"})
	var forked mcptools.ForkOutput
	res, text, out = mcpCall(t, cs, "sandbox_fork", map[string]any{"sandbox_id": id, "count": 1})
	if res.IsError || json.Unmarshal([]byte(out), &forked) != nil || len(forked.IDs) != 1 || forked.IDs[0] == id {
		t.Fatalf("sandbox_fork: got %v %q %s, want one new id", res.IsError, text, out)
	}
	fid := forked.IDs[0]
	t.Cleanup(func() { mcpCall(t, cs, "sandbox_stop", map[string]any{"sandbox_id": fid}) })
	mcpCall(t, cs, "sandbox_write_file", map[string]any{"sandbox_id": fid, "path": "fork.txt", "content": "fork"})
	var listed mcptools.ListFilesOutput
	if _, _, out = mcpCall(t, cs, "sandbox_list_files", map[string]any{"sandbox_id": fid}); json.Unmarshal([]byte(out), &listed) != nil || len(listed.Entries) != 2 {
		t.Errorf("the fork's files: %s, want before-fork.txt and fork.txt", out)
	}
	if _, _, out = mcpCall(t, cs, "sandbox_list_files", map[string]any{"sandbox_id": id}); strings.Contains(out, `"name":"fork.txt"`) {
		t.Errorf("the source's files after the fork wrote: %s", out)
	}

	var ex mcptools.ExecOutput
	res, text, out = mcpCall(t, cs, "sandbox_exec", map[string]any{"sandbox_id": id, "command": "echo hi; echo err >&2; pwd; exit 3"})
	json.Unmarshal([]byte(out), &ex)
	if res.IsError || ex != (mcptools.ExecOutput{ExitCode: 3, Stdout: "hi\n/workspace\n", Stderr: "err\n"}) {
		t.Errorf("sandbox_exec: got %v %q %+v, want exit 3, hi and err", res.IsError, text, ex)
	}
	res, _, out = mcpCall(t, cs, "sandbox_exec", map[string]any{"sandbox_id": id, "command": "sleep 30", "timeout_seconds": 1})
	json.Unmarshal([]byte(out), &ex)
	if res.IsError || !ex.TimedOut {
		t.Errorf("sandbox_exec with timeout_seconds 1: got %v %+v, want timed_out", res.IsError, ex)
	}

	res, _, out = mcpCall(t, cs, "sandbox_write_file", map[string]any{"sandbox_id": id, "path": "notes/a.txt", "content": "héllo\n"})
	if res.IsError || !strings.Contains(out, `"message":"wrote 7 bytes to /workspace/notes/a.txt"`) {
		t.Errorf("sandbox_write_file: got %v %s", res.IsError, out)
	}
	res, _, out = mcpCall(t, cs, "sandbox_read_file", map[string]any{"sandbox_id": id, "path": "/workspace/notes/a.txt"})
	if res.IsError || out != `{"content":"héllo\n"}` {
		t.Errorf("sandbox_read_file: got %v %s, want what was written", res.IsError, out)
	}
	var ls mcptools.ListFilesOutput
	res, _, out = mcpCall(t, cs, "sandbox_list_files", map[string]any{"sandbox_id": id, "path": "notes"})
	json.Unmarshal([]byte(out), &ls)
	if res.IsError || !slices.Equal(ls.Entries, []mcptools.Entry{{Name: "a.txt", Type: "file", Size: 7}}) {
		t.Errorf("sandbox_list_files: got %v %s, want a.txt of 7 bytes", res.IsError, out)
	}

	var run mcptools.RunCodeOutput
	res, text, out = mcpCall(t, cs, "sandbox_run_code", map[string]any{"sandbox_id": id, "code": "x = 6 * 7\nprint(open('notes/a.txt').read().strip())\nx"})
	json.Unmarshal([]byte(out), &run)
	if res.IsError || !slices.Equal(run.Results, []string{"42"}) || run.Stdout != "héllo\n" || run.Error != nil {
		t.Errorf("sandbox_run_code: got %v %q %s, want 42 and the file's line", res.IsError, text, out)
	}
	res, _, out = mcpCall(t, cs, "sandbox_run_code", map[string]any{"sandbox_id": id, "code": "x / 0"})
	json.Unmarshal([]byte(out), &run)
	if res.IsError || run.Error == nil || run.Error.Name != "ZeroDivisionError" {
		t.Errorf("sandbox_run_code raising: got %v %s, want the ZeroDivisionError as data", res.IsError, out)
	}

	res, text, _ = mcpCall(t, cs, "sandbox_exec", map[string]any{"sandbox_id": "sbx_doesnotexist", "command": "true"})
	if !res.IsError || !strings.HasPrefix(text, "not_found: ") {
		t.Errorf("sandbox_exec in an unknown sandbox: got %v %q, want a tool error starting not_found", res.IsError, text)
	}

	var st mcptools.StopOutput
	res, text, out = mcpCall(t, cs, "sandbox_stop", map[string]any{"sandbox_id": id})
	json.Unmarshal([]byte(out), &st)
	if res.IsError || st.Sandbox.State != "ended" {
		t.Errorf("sandbox_stop: got %v %q %s, want it ended", res.IsError, text, out)
	}
	stopped = true
}

func mcpConnect(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("connecting the MCP client: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpHTTP is the streamable HTTP transport to s's /v1/mcp with key.
func mcpHTTP(s *testenv.Server, key string) mcp.Transport {
	return mcptest.HTTP(s.URL+"/v1/mcp", key)
}

// mcpCall calls a tool, failing the test on a protocol error, and returns
// its result, its text and its structured content as JSON.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string, string) {
	t.Helper()
	// Not t.Context(): cleanups stop sandboxes after the test's context ended.
	return mcptest.Call(context.Background(), t, cs, name, args)
}
