package mcptools

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// fakeAPI is just enough of the API for the tools: one sandbox, sbx-1,
// whose exec prints a lot, whose files are a map, and which knows the key
// "good".
type fakeAPI struct {
	mu    sync.Mutex
	files map[string]string
	execs []api.ExecRequest
}

func (f *fakeAPI) handler() http.Handler {
	mux := http.NewServeMux()
	fail := func(w http.ResponseWriter, status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg}})
	}
	sbx := api.Sandbox{ID: "sbx-1", State: "running", VCPUs: 1, MemoryMiB: 512, CreatedAt: time.Now(), LeaseEndsAt: time.Now().Add(time.Hour)}
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateSandboxRequest
		json.NewDecoder(r.Body).Decode(&req)
		s := sbx
		s.VCPUs = req.VCPUs
		if req.Template != "" {
			if req.Template != "myteam/app:v1" {
				w.WriteHeader(http.StatusNotFound)
				json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no template " + req.Template}})
				return
			}
			s.Template = req.Template
		}
		if s.Isolation = req.Isolation; s.Isolation == "" {
			s.Isolation = "gvisor"
		}
		if req.Network != nil {
			s.Network = *req.Network
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(s)
	})
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.SandboxList{Sandboxes: []api.Sandbox{sbx}})
	})
	mux.HandleFunc("POST /v1/sandboxes/sbx-1/fork", func(w http.ResponseWriter, r *http.Request) {
		var req api.ForkRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.Count > 16 {
			fail(w, http.StatusBadRequest, "invalid_request", "count must be 1 to 16")
			return
		}
		var out api.ForkResult
		for i := range req.Count {
			s := sbx
			s.ID = fmt.Sprintf("sbx-f%d", i)
			out.Sandboxes = append(out.Sandboxes, s)
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /v1/sandboxes/sbx-1", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sbx)
	})
	mux.HandleFunc("POST /v1/sandboxes/sbx-1/exec", func(w http.ResponseWriter, r *http.Request) {
		var req api.ExecRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.execs = append(f.execs, req)
		f.mu.Unlock()
		enc := json.NewEncoder(w)
		enc.Encode(api.ExecEvent{Type: api.EventStart, Pid: 7})
		// 30000 characters of stdout in chunks, ending in "END".
		for i := 0; i < 300; i++ {
			enc.Encode(api.OutputEvent(api.EventStdout, []byte(strings.Repeat("é", 99)+"\n")))
		}
		enc.Encode(api.OutputEvent(api.EventStdout, []byte("END")))
		enc.Encode(api.OutputEvent(api.EventStderr, []byte("oops\n")))
		code := 3
		enc.Encode(api.ExecEvent{Type: api.EventExit, ExitCode: &code})
	})
	mux.HandleFunc("POST /v1/sandboxes/sbx-1/code", func(w http.ResponseWriter, r *http.Request) {
		var req api.CodeRequest
		json.NewDecoder(r.Body).Decode(&req)
		enc := json.NewEncoder(w)
		if req.Code == "sleep" {
			// The agent's words for a cell interrupted at its timeout.
			enc.Encode(api.CodeEvent{Type: api.CodeEventException, Exception: &api.CodeException{Name: "TimeoutError",
				Value: fmt.Sprintf("the cell ran longer than timeout_ms=%d and was interrupted; the context keeps its state", req.TimeoutMs)}})
			enc.Encode(api.CodeEvent{Type: api.CodeEventEnd, ExecutionCount: 1})
			return
		}
		if req.Code == "flood" {
			// 300000 characters of stdout, then 1000 results of 100
			// characters, each with a PNG.
			for range 300 {
				enc.Encode(api.CodeEvent{Type: api.CodeEventStdout, Text: strings.Repeat("x", 999) + "\n"})
			}
			enc.Encode(api.CodeEvent{Type: api.CodeEventStdout, Text: "END"})
			for i := range 1000 {
				enc.Encode(api.CodeEvent{Type: api.CodeEventResult, Result: &api.CodeResult{Text: fmt.Sprintf("%0100d", i), PNG: "iVBORw0KGgo="}})
			}
			enc.Encode(api.CodeEvent{Type: api.CodeEventEnd, ExecutionCount: 2})
			return
		}
		enc.Encode(api.CodeEvent{Type: api.CodeEventStdout, Text: "ran " + req.Code + "\n"})
		enc.Encode(api.CodeEvent{Type: api.CodeEventStdout, Text: fmt.Sprintf("timeout_ms=%d\n", req.TimeoutMs)})
		enc.Encode(api.CodeEvent{Type: api.CodeEventResult, Result: &api.CodeResult{Text: "<Figure>", PNG: "iVBORw0KGgo="}})
		enc.Encode(api.CodeEvent{Type: api.CodeEventResult, Result: &api.CodeResult{Text: "3", IsMainResult: true}})
		enc.Encode(api.CodeEvent{Type: api.CodeEventException, Exception: &api.CodeException{Name: "ZeroDivisionError", Value: "division by zero", Traceback: "Traceback..."}})
		enc.Encode(api.CodeEvent{Type: api.CodeEventEnd, ExecutionCount: 1})
	})
	mux.HandleFunc("GET /v1/sandboxes/sbx-1/files", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		data, ok := f.files[r.URL.Query().Get("path")]
		f.mu.Unlock()
		if !ok {
			fail(w, 404, "not_found", "no such file")
			return
		}
		io.WriteString(w, data)
	})
	mux.HandleFunc("GET /v1/sandboxes/sbx-1/files/stat", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		data := f.files[r.URL.Query().Get("path")]
		f.mu.Unlock()
		json.NewEncoder(w).Encode(api.FileInfo{Path: r.URL.Query().Get("path"), Size: int64(len(data))})
	})
	mux.HandleFunc("PUT /v1/sandboxes/sbx-1/files", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		p := r.URL.Query().Get("path")
		f.mu.Lock()
		f.files[p] = string(b)
		f.mu.Unlock()
		json.NewEncoder(w).Encode(api.FileInfo{Path: "/workspace/" + p, Size: int64(len(b)), Type: "file"})
	})
	mux.HandleFunc("GET /v1/sandboxes/sbx-1/files/list", func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Query().Get("path"); p != "." {
			fail(w, 404, "not_found", p+": no such file or directory")
			return
		}
		var l api.FileList
		for i := range 450 {
			l.Entries = append(l.Entries, api.FileInfo{Name: fmt.Sprintf("f%03d", 449-i), Type: "file", Size: int64(i)})
		}
		json.NewEncoder(w).Encode(l)
	})
	mux.HandleFunc("DELETE /v1/sandboxes/sbx-1", func(w http.ResponseWriter, r *http.Request) {
		s := sbx
		s.State = "ended"
		json.NewEncoder(w).Encode(s)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			fail(w, 401, "unauthorized", "unknown API key")
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v1/sandboxes/") && !strings.HasPrefix(r.URL.Path, "/v1/sandboxes/sbx-1") {
			fail(w, 404, "not_found", "no sandbox "+strings.TrimPrefix(r.URL.Path, "/v1/sandboxes/"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// connect serves the tools over an in-memory transport, acting through a
// client of srv with key.
func connect(t *testing.T, srv *httptest.Server, key string) *mcp.ClientSession {
	t.Helper()
	c, err := client.New(client.WithBaseURL(srv.URL), client.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := NewServer(c, Options{Version: "test"}).Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if out != nil && !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestToolsAndSchemas(t *testing.T) {
	srv := httptest.NewServer((&fakeAPI{files: map[string]string{}}).handler())
	defer srv.Close()
	cs := connect(t, srv, "good")
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"sandbox_create":     nil,
		"sandbox_list":       nil,
		"sandbox_exec":       {"command", "sandbox_id"},
		"sandbox_run_code":   {"code", "sandbox_id"},
		"sandbox_read_file":  {"path", "sandbox_id"},
		"sandbox_write_file": {"content", "path", "sandbox_id"},
		"sandbox_list_files": {"sandbox_id"},
		"sandbox_stop":       {"sandbox_id"},
		"sandbox_fork":       {"sandbox_id"},
	}
	got := map[string][]string{}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type     string         `json:"type"`
			Required []string       `json:"required"`
			Props    map[string]any `json:"properties"`
		}
		json.Unmarshal(b, &schema)
		if schema.Type != "object" {
			t.Errorf("%s: input schema type got %q, want object", tool.Name, schema.Type)
		}
		slices.Sort(schema.Required)
		got[tool.Name] = schema.Required
		if tool.OutputSchema == nil {
			t.Errorf("%s: no output schema", tool.Name)
		}
		if tool.Description == "" {
			t.Errorf("%s: no description", tool.Name)
		}
		if tool.Name == "sandbox_exec" {
			for _, p := range []string{"command", "cwd", "timeout_seconds", "sandbox_id"} {
				if _, ok := schema.Props[p]; !ok {
					t.Errorf("sandbox_exec: no parameter %s in %s", p, b)
				}
			}
		}
	}
	for name, req := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("tool %s: missing", name)
			continue
		}
		if !slices.Equal(g, req) {
			t.Errorf("%s: required got %v, want %v", name, g, req)
		}
	}
}

func TestExecCapsAndDefaults(t *testing.T) {
	f := &fakeAPI{files: map[string]string{}}
	srv := httptest.NewServer(f.handler())
	defer srv.Close()
	cs := connect(t, srv, "good")
	var out ExecOutput
	res := call(t, cs, "sandbox_exec", map[string]any{"sandbox_id": "sbx-1", "command": "make", "cwd": "src"}, &out)
	if res.IsError {
		t.Fatalf("exec: got error %q", text(res))
	}
	if out.ExitCode != 3 || out.TimedOut || out.Stderr != "oops\n" {
		t.Errorf("exec: got exit %d timed_out %v stderr %q, want 3 false \"oops\\n\"", out.ExitCode, out.TimedOut, out.Stderr)
	}
	note, kept, _ := strings.Cut(out.Stdout, "\n")
	if note != "[stdout was cut: only its last 20000 characters are shown]" {
		t.Errorf("stdout note: got %q", note)
	}
	if n := len([]rune(kept)); n != OutputCap || !strings.HasSuffix(kept, "é\nEND") {
		t.Errorf("stdout kept: got %d characters ending %q, want %d ending in END", n, kept[max(0, len(kept)-10):], OutputCap)
	}
	f.mu.Lock()
	req := f.execs[0]
	f.mu.Unlock()
	if req.Cmd.Shell != "make" || req.Cwd != "src" || req.TimeoutMs != DefaultTimeoutSeconds*1000 {
		t.Errorf("exec request: got %+v, want shell make, cwd src, timeout %d s", req, DefaultTimeoutSeconds)
	}
	res = call(t, cs, "sandbox_exec", map[string]any{"sandbox_id": "sbx-1", "command": "x", "timeout_seconds": -1}, nil)
	if !res.IsError || !strings.HasPrefix(text(res), "invalid_request: ") {
		t.Errorf("negative timeout: got %v %q, want an invalid_request tool error", res.IsError, text(res))
	}
}

func TestFileTools(t *testing.T) {
	long := strings.Repeat("a", OutputCap+5)
	f := &fakeAPI{files: map[string]string{"long.txt": long, "bin": "\x7fELF\x00\x01"}}
	srv := httptest.NewServer(f.handler())
	defer srv.Close()
	cs := connect(t, srv, "good")

	var w WriteFileOutput
	call(t, cs, "sandbox_write_file", map[string]any{"sandbox_id": "sbx-1", "path": "a.txt", "content": "héllo"}, &w)
	if w.Message != "wrote 6 bytes to /workspace/a.txt" || w.Size != 6 {
		t.Errorf("write: got %+v, want 6 bytes to /workspace/a.txt", w)
	}
	tests := []struct {
		path string
		want string
	}{
		{"a.txt", "héllo"},
		{"long.txt", long[:OutputCap] + fmt.Sprintf("\n[cut: only the first %d bytes of long.txt are shown (%d bytes in all); use sandbox_exec with tail or sed -n to read the rest]", OutputCap, OutputCap+5)},
		{"bin", "[bin is a binary file (6 bytes); use sandbox_exec with file, xxd or python3 to inspect it]"},
	}
	for _, tt := range tests {
		var r ReadFileOutput
		res := call(t, cs, "sandbox_read_file", map[string]any{"sandbox_id": "sbx-1", "path": tt.path}, &r)
		if res.IsError || r.Content != tt.want {
			t.Errorf("read %s: got %v %.80q, want %.80q", tt.path, res.IsError, r.Content, tt.want)
		}
	}
	// A path that is not there is data the model reads, not a failed call.
	for _, tt := range []struct{ path, want string }{
		{"nope", "not found: /workspace/nope (no such file or directory)"},
		{"/etc/x/../nope", "not found: /etc/nope (no such file or directory)"},
	} {
		var r ReadFileOutput
		res := call(t, cs, "sandbox_read_file", map[string]any{"sandbox_id": "sbx-1", "path": tt.path}, &r)
		if res.IsError || r.Content != tt.want {
			t.Errorf("missing file %s: got %v %q %q, want the content %q", tt.path, res.IsError, r.Content, text(res), tt.want)
		}
	}
	var missing ListFilesOutput
	res := call(t, cs, "sandbox_list_files", map[string]any{"sandbox_id": "sbx-1", "path": "nodir"}, &missing)
	if want := []Entry{{Name: "not found: /workspace/nodir (no such file or directory)", Type: "note"}}; res.IsError || !slices.Equal(missing.Entries, want) {
		t.Errorf("missing directory: got %v %+v %q, want %+v", res.IsError, missing.Entries, text(res), want)
	}
	// In a sandbox that is not there, not_found is the platform's failure.
	for _, tool := range []string{"sandbox_read_file", "sandbox_list_files"} {
		res := call(t, cs, tool, map[string]any{"sandbox_id": "sbx-gone", "path": "nope"}, nil)
		if !res.IsError || !strings.HasPrefix(text(res), "not_found: no sandbox sbx-gone/files") {
			t.Errorf("%s in an unknown sandbox: got %v %q, want the tool error not_found", tool, res.IsError, text(res))
		}
	}

	var l ListFilesOutput
	call(t, cs, "sandbox_list_files", map[string]any{"sandbox_id": "sbx-1"}, &l)
	if len(l.Entries) != ListCap+1 || l.Entries[0].Name != "f000" || l.Entries[ListCap] != (Entry{Name: "[50 more entries not shown]", Type: "note"}) {
		t.Errorf("list: got %d entries, first %+v, last %+v; want %d sorted, then a note of 50 more", len(l.Entries), l.Entries[0], l.Entries[len(l.Entries)-1], ListCap)
	}
}

func TestPlatformErrors(t *testing.T) {
	srv := httptest.NewServer((&fakeAPI{files: map[string]string{}}).handler())
	defer srv.Close()
	cs := connect(t, srv, "good")
	tests := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{"unknown sandbox", "sandbox_exec", map[string]any{"sandbox_id": "sbx-gone", "command": "true"}, "not_found: no sandbox sbx-gone/exec"},
		{"empty id", "sandbox_stop", map[string]any{"sandbox_id": ""}, "invalid_request: sandbox_id is empty"},
		{"fork of none", "sandbox_fork", map[string]any{"sandbox_id": "sbx-1", "count": 0}, "invalid_request: count must be 1 to 16"},
		{"fork of too many", "sandbox_fork", map[string]any{"sandbox_id": "sbx-1", "count": 17}, "invalid_request: count must be 1 to 16"},
		{"run_code in an unknown sandbox", "sandbox_run_code", map[string]any{"sandbox_id": "sbx-gone", "code": "1"}, "not_found: no sandbox sbx-gone/code"},
		// The SDK's own checks of the arguments, led by the code too.
		{"missing argument", "sandbox_exec", map[string]any{"sandbox_id": "sbx-1"}, "invalid_request: validating \"arguments\""},
		{"argument of the wrong type", "sandbox_exec", map[string]any{"sandbox_id": "sbx-1", "command": "x", "timeout_seconds": "ten"}, "invalid_request: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, cs, tt.tool, tt.args, nil)
			if !res.IsError || !strings.HasPrefix(text(res), tt.want) {
				t.Errorf("got IsError %v %q, want a tool error starting %q", res.IsError, text(res), tt.want)
			}
			// A failed call has no result: no zero-valued one (exit_code 0) to misread.
			if res.StructuredContent != nil {
				t.Errorf("structured content: got %v, want none with the error", res.StructuredContent)
			}
		})
	}
	bad := connect(t, srv, "bad")
	res := call(t, bad, "sandbox_list", nil, nil)
	if !res.IsError || text(res) != "unauthorized: unknown API key" || res.StructuredContent != nil {
		t.Errorf("bad key: got %v %q, want the tool error \"unauthorized: unknown API key\"", res.IsError, text(res))
	}
}

func TestCreateListStop(t *testing.T) {
	srv := httptest.NewServer((&fakeAPI{files: map[string]string{}}).handler())
	defer srv.Close()
	cs := connect(t, srv, "good")
	var c CreateOutput
	res := call(t, cs, "sandbox_create", map[string]any{"vcpus": 2, "network": map[string]any{"internet": true, "allow": []string{"pypi.example"}}}, &c)
	if res.IsError || c.ID != "sbx-1" || c.Sandbox.VCPUs != 2 || !c.Sandbox.Network.Internet || !slices.Equal(c.Sandbox.Network.Allow, []string{"pypi.example"}) {
		t.Errorf("create: got %v %q %+v, want sbx-1 with 2 vcpus and the allow list", res.IsError, text(res), c)
	}
	if c.Sandbox.Isolation != "gvisor" {
		t.Errorf("create without isolation: got %q, want the server's default", c.Sandbox.Isolation)
	}
	res = call(t, cs, "sandbox_create", map[string]any{"isolation": "microvm"}, &c)
	if res.IsError || c.Sandbox.Isolation != "microvm" {
		t.Errorf("create with isolation microvm: got %v %q %+v", res.IsError, text(res), c)
	}
	res = call(t, cs, "sandbox_create", map[string]any{"template": "myteam/app:v1"}, &c)
	if res.IsError || c.Sandbox.Template != "myteam/app:v1" {
		t.Errorf("create with a template: got %v %q %+v", res.IsError, text(res), c)
	}
	res = call(t, cs, "sandbox_create", map[string]any{"template": "nope"}, nil)
	if !res.IsError || text(res) != "not_found: no template nope" {
		t.Errorf("create with an unknown template: got %v %q, want the tool error not_found", res.IsError, text(res))
	}
	var l ListOutput
	res = call(t, cs, "sandbox_list", map[string]any{}, &l)
	if res.IsError || len(l.Sandboxes) != 1 || l.Sandboxes[0].ID != "sbx-1" {
		t.Errorf("list: got %+v, want sbx-1", l)
	}
	var f ForkOutput
	res = call(t, cs, "sandbox_fork", map[string]any{"sandbox_id": "sbx-1", "count": 2}, &f)
	if res.IsError || !slices.Equal(f.IDs, []string{"sbx-f0", "sbx-f1"}) || len(f.Sandboxes) != 2 {
		t.Errorf("fork of 2: got %v %q %+v, want sbx-f0 and sbx-f1", res.IsError, text(res), f)
	}
	res = call(t, cs, "sandbox_fork", map[string]any{"sandbox_id": "sbx-1"}, &f)
	if res.IsError || !slices.Equal(f.IDs, []string{"sbx-f0"}) {
		t.Errorf("fork without a count: got %v %q %+v, want one", res.IsError, text(res), f)
	}
	var s StopOutput
	res = call(t, cs, "sandbox_stop", map[string]any{"sandbox_id": "sbx-1"}, &s)
	if res.IsError || s.Sandbox.State != "ended" {
		t.Errorf("stop: got %v %q state %q, want ended", res.IsError, text(res), s.Sandbox.State)
	}
}

func TestRunCode(t *testing.T) {
	srv := httptest.NewServer((&fakeAPI{files: map[string]string{}}).handler())
	defer srv.Close()
	cs := connect(t, srv, "good")
	var out RunCodeOutput
	res := call(t, cs, "sandbox_run_code", map[string]any{"sandbox_id": "sbx-1", "code": "1/0"}, &out)
	if res.IsError {
		t.Fatalf("run_code: got the tool error %q", text(res))
	}
	want := RunCodeOutput{
		Results: []string{"<Figure>\n[also as png]", "3"},
		Stdout:  "ran 1/0\ntimeout_ms=120000\n",
		Stderr:  "",
		Error:   &CodeError{Name: "ZeroDivisionError", Value: "division by zero", Traceback: "Traceback..."},
	}
	if !slices.Equal(out.Results, want.Results) || out.Stdout != want.Stdout || out.Stderr != "" || out.Error == nil || *out.Error != *want.Error {
		t.Errorf("run_code: got %+v %+v, want %+v %+v", out, out.Error, want, want.Error)
	}
	var images int
	for _, c := range res.Content {
		if im, ok := c.(*mcp.ImageContent); ok {
			images++
			if im.MIMEType != "image/png" || string(im.Data[:4]) != "\x89PNG" {
				t.Errorf("image: got %s %q, want the PNG's bytes", im.MIMEType, im.Data[:4])
			}
		}
	}
	if images != 1 {
		t.Errorf("images: got %d, want 1", images)
	}
}

// A cell interrupted at its timeout is told of in the tool's terms: the
// model passed timeout_seconds, not the API's timeout_ms.
func TestRunCodeTimeoutInSeconds(t *testing.T) {
	srv := httptest.NewServer((&fakeAPI{files: map[string]string{}}).handler())
	defer srv.Close()
	cs := connect(t, srv, "good")
	var out RunCodeOutput
	res := call(t, cs, "sandbox_run_code", map[string]any{"sandbox_id": "sbx-1", "code": "sleep", "timeout_seconds": 2}, &out)
	want := "the cell ran longer than timeout_seconds=2 and was interrupted; the context keeps its state"
	if res.IsError || out.Error == nil || out.Error.Name != "TimeoutError" || out.Error.Value != want {
		t.Errorf("got %v %+v %q, want TimeoutError %q", res.IsError, out.Error, text(res), want)
	}
	if got := inSeconds("ran longer than timeout_ms=1500 and ignored the interrupt"); got != "ran longer than timeout_seconds=1.5 and ignored the interrupt" {
		t.Errorf("inSeconds: got %q", got)
	}
}

// A cell's flood of output and results comes back within the caps: the
// end of stdout, the results whose text fits OutputCap, maxImages images.
func TestRunCodeFlood(t *testing.T) {
	srv := httptest.NewServer((&fakeAPI{files: map[string]string{}}).handler())
	defer srv.Close()
	cs := connect(t, srv, "good")
	var out RunCodeOutput
	res := call(t, cs, "sandbox_run_code", map[string]any{"sandbox_id": "sbx-1", "code": "flood"}, &out)
	if res.IsError {
		t.Fatalf("run_code: got the tool error %q", text(res))
	}
	note, kept, _ := strings.Cut(out.Stdout, "\n")
	if note != "[stdout was cut: only its last 20000 characters are shown]" || len(kept) != OutputCap || !strings.HasSuffix(kept, "x\nEND") {
		t.Errorf("stdout: got note %q and %d characters ending %q, want the last %d", note, len(kept), kept[max(0, len(kept)-5):], OutputCap)
	}
	// 200 results of 100 characters fill the budget; the 800 others are counted.
	if n := len(out.Results); n != 201 || out.Results[0] != fmt.Sprintf("%0100d", 0)+"\n[also as png]" || out.Results[200] != "[800 more results not shown]" {
		t.Errorf("results: got %d, first %q, last %q; want 200 and a note of 800 more", n, out.Results[0], out.Results[n-1])
	}
	var images int
	for _, c := range res.Content {
		if _, ok := c.(*mcp.ImageContent); ok {
			images++
		}
	}
	if images != maxImages {
		t.Errorf("images: got %d, want %d", images, maxImages)
	}
}

// resultKeeper holds what fits its budget, not every result it is given.
func TestResultKeeperIsBounded(t *testing.T) {
	k := resultKeeper{out: []string{}, budget: 50}
	for range 10_000 {
		k.add(api.CodeResult{Text: "0123456789", PNG: "iVBORw0KGgo="})
	}
	k.add(api.CodeResult{Text: strings.Repeat("é", 100)})
	got := k.list()
	if len(got) != 6 || len(k.images) != maxImages || got[5] != "[9996 more results not shown]" {
		t.Errorf("got %d results kept (last %q) and %d images, want 5, a note of 9996 more, %d images", len(got), got[len(got)-1], len(k.images), maxImages)
	}
	k = resultKeeper{out: []string{}, budget: 5}
	k.add(api.CodeResult{Text: "héllo, world"})
	if got, want := k.list(), []string{"héllo\n[result cut: only its first 5 of 12 characters are shown]"}; !slices.Equal(got, want) {
		t.Errorf("cut result: got %q, want %q", got, want)
	}
}

// tailWriter moves the bytes it keeps only past twice its size: a stream
// written in small pieces is not copied whole on every write.
func TestTailWriterTrimsRarely(t *testing.T) {
	var w tailWriter
	piece := make([]byte, 100)
	written, trims, start := 0, 0, 0
	for i := 0; written < 5*tailBytes; i++ {
		for j := range piece {
			piece[j] = byte(i)
		}
		w.Write(piece)
		written += len(piece)
		if s := written - len(w.buf); s != start {
			trims, start = trims+1, s
		}
	}
	// A trim per write past the cap would be thousands of them.
	if trims > 5 {
		t.Errorf("trims: got %d in %d writes of %d bytes, want at most one per %d bytes", trims, written/len(piece), len(piece), tailBytes)
	}
	if !w.cut || len(w.buf) < tailBytes || len(w.buf) > 2*tailBytes || w.buf[len(w.buf)-1] != byte(written/len(piece)-1) {
		t.Errorf("kept: got %d bytes (cut %v), want between %d and %d ending in the last piece", len(w.buf), w.cut, tailBytes, 2*tailBytes)
	}
}
