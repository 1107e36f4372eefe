package e2bcompat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

func TestLineEncoding(t *testing.T) {
	at := time.Unix(1700000000, 5)
	for _, c := range []struct {
		name string
		line any
		want string
	}{
		{"stdout", stdoutLine("hi\n", at), `{"type":"stdout","text":"hi\n","timestamp":1700000000000000005}`},
		{"stderr", stderrLine("oops", at), `{"type":"stderr","text":"oops","timestamp":1700000000000000005}`},
		{"empty stdout keeps its fields", stdoutLine("", at), `{"type":"stdout","text":"","timestamp":1700000000000000005}`},
		{"main result", resultOf(api.CodeResult{Text: "2", IsMainResult: true}), `{"type":"result","text":"2","is_main_result":true}`},
		{"display keeps is_main_result", resultOf(api.CodeResult{PNG: "iVBO"}), `{"type":"result","png":"iVBO","is_main_result":false}`},
		{"html unescaped, json as is", resultOf(api.CodeResult{HTML: "<table>&</table>", JSON: json.RawMessage(`{"a":[1]}`), Text: "t"}),
			`{"type":"result","text":"t","html":"<table>&</table>","json":{"a":[1]},"is_main_result":false}`},
		{"every mime type", resultOf(api.CodeResult{Markdown: "m", SVG: "s", JPEG: "j", LaTeX: "l", JavaScript: "js"}),
			`{"type":"result","markdown":"m","svg":"s","jpeg":"j","latex":"l","javascript":"js","is_main_result":false}`},
		{"error", errorOf(api.CodeException{Name: "FinalAnswerException", Value: "safe:1", Traceback: "tb"}),
			`{"type":"error","name":"FinalAnswerException","value":"safe:1","traceback":"tb"}`},
		{"error with empty traceback keeps the field", errorOf(api.CodeException{Name: "E", Value: "v"}),
			`{"type":"error","name":"E","value":"v","traceback":""}`},
		{"keepalive", typeLine{Type: lineKeepalive}, `{"type":"keepalive"}`},
	} {
		got, err := encodeLine(c.line)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(got) != c.want+"\n" {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

func TestEndLines(t *testing.T) {
	for _, c := range []struct {
		name string
		exc  *api.CodeException
		want []string
	}{
		{"clean", nil, []string{`{"type":"number_of_executions","execution_count":3}`, `{"type":"end_of_execution"}`}},
		{"exception", &api.CodeException{Name: "ValueError", Value: "x", Traceback: "t"}, []string{
			`{"type":"error","name":"ValueError","value":"x","traceback":"t"}`,
			`{"type":"number_of_executions","execution_count":3}`, `{"type":"end_of_execution"}`}},
	} {
		var got []string
		for _, l := range endLines(c.exc, 3) {
			b, _ := encodeLine(l)
			got = append(got, strings.TrimSuffix(string(b), "\n"))
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestContextMapping(t *testing.T) {
	for _, c := range []struct {
		in   api.CodeContext
		want e2bContext
	}{
		{api.CodeContext{ID: "default", Language: "python", Cwd: "/workspace"}, e2bContext{"default", "python", "/home/user"}},
		{api.CodeContext{ID: "ctx_0123456789abcdef", Cwd: "/tmp"}, e2bContext{"ctx_0123456789abcdef", "python", "/tmp"}},
	} {
		if got := codeContextOf(c.in); got != c.want {
			t.Errorf("%v: got %v, want %v", c.in, got, c.want)
		}
	}
	for in, want := range map[string]string{"": "/home/user", "data": "/home/user/data", "/srv": "/srv"} {
		if got := codeContextCwd(in); got != want {
			t.Errorf("cwd %q: got %q, want %q", in, got, want)
		}
	}
}

// codeAPI is a fake of withruntime's code routes for sandbox "run": it
// records every cell it is sent and answers each with the events cell
// gives.
type codeAPI struct {
	mu       sync.Mutex
	cells    []api.CodeRequest
	contexts []api.CodeContext
	cell     func(req api.CodeRequest) (status int, events []api.CodeEvent)
}

func (f *codeAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/run", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"id": "run", "state": "running"})
	})
	mux.HandleFunc("GET /v1/sandboxes/run/contexts", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		json.NewEncoder(w).Encode(api.CodeContextList{Contexts: f.contexts})
	})
	mux.HandleFunc("POST /v1/sandboxes/run/code", func(w http.ResponseWriter, r *http.Request) {
		var req api.CodeRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.cells = append(f.cells, req)
		if req.ContextID == "" && len(f.contexts) == 0 {
			f.contexts = append(f.contexts, api.CodeContext{ID: "default", Language: "python", Cwd: "/workspace"})
		}
		f.mu.Unlock()
		status, events := http.StatusOK, []api.CodeEvent{{Type: api.CodeEventEnd, ExecutionCount: 1}}
		if !strings.Contains(req.Code, "_withruntime_e2b_") && !strings.Contains(req.Code, "chdir") {
			status, events = f.cell(req)
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(status)
		if status != http.StatusOK {
			w.Write([]byte(`{"error":{"code":"not_found","message":"no code context \"ctx_00000000000000ff\""}}`))
			return
		}
		enc := json.NewEncoder(w)
		for _, ev := range events {
			enc.Encode(ev)
		}
	})
	return mux
}

func execute(t *testing.T, s *Server, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/execute", strings.NewReader(body))
	req.Header.Set(headerSandboxID, "run")
	req.Header.Set(headerSandboxPort, InterpreterPort)
	req.Header.Set(headerAccessToken, s.sealToken("run", "wr_good"))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// ndjson splits a stream into its lines, failing on a blank one or one
// that is not a JSON object.
func ndjson(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	if len(body) > 0 && body[len(body)-1] != '\n' {
		t.Errorf("the stream does not end with a newline: %q", body)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestExecuteStream(t *testing.T) {
	f := &codeAPI{cell: func(req api.CodeRequest) (int, []api.CodeEvent) {
		return http.StatusOK, []api.CodeEvent{
			{Type: api.CodeEventStdout, Text: "hello\n"},
			{Type: api.CodeEventStderr, Text: "warn\n"},
			{Type: api.CodeEventResult, Result: &api.CodeResult{PNG: "iVBO"}},
			{Type: api.CodeEventResult, Result: &api.CodeResult{Text: "42", IsMainResult: true}},
			{Type: api.CodeEventException, Exception: &api.CodeException{Name: "FinalAnswerException", Value: "safe:42", Traceback: "tb"}},
			{Type: api.CodeEventEnd, ExecutionCount: 7},
		}
	}}
	s, err := New(Config{API: f.handler(), Secret: bytes.Repeat([]byte{7}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	rec := execute(t, s, `{"code":"print('hello')","context_id":null,"language":null,"env_vars":{"GREETING":"hi \"there\""}}`)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("got %d %q, want 200 application/x-ndjson: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var types []string
	lines := ndjson(t, rec.Body.Bytes())
	for _, l := range lines {
		types = append(types, l["type"].(string))
	}
	want := "stdout stderr result result error number_of_executions end_of_execution"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("got lines %s, want %s", got, want)
	}
	if l := lines[0]; l["text"] != "hello\n" || l["timestamp"] == nil {
		t.Errorf("stdout line %v, want its text and a timestamp", l)
	}
	if l := lines[3]; l["text"] != "42" || l["is_main_result"] != true {
		t.Errorf("main result %v", l)
	}
	if l := lines[4]; l["name"] != "FinalAnswerException" || l["value"] != "safe:42" || l["traceback"] != "tb" {
		t.Errorf("error line %v", l)
	}
	if l := lines[5]; l["execution_count"] != float64(7) {
		t.Errorf("count line %v, want 7", l)
	}
	// The cells the API saw: the default context moved to E2B's home, the
	// env set, the caller's cell, the env put back.
	var got []string
	for _, c := range f.cells {
		switch {
		case strings.Contains(c.Code, "chdir"):
			got = append(got, "chdir")
		case strings.Contains(c.Code, "_withruntime_e2b_saved_env = "):
			got = append(got, "setenv")
		case strings.Contains(c.Code, "globals().pop(\"_withruntime_e2b_saved_env\""):
			got = append(got, "restore")
		case c.Code == "print('hello')":
			got = append(got, "cell")
		default:
			got = append(got, "?"+c.Code)
		}
	}
	if strings.Join(got, " ") != "chdir setenv cell restore" {
		t.Errorf("got cells %v, want chdir setenv cell restore", got)
	}
	// A second cell: the default context exists, no env: just the cell.
	f.cells = nil
	execute(t, s, `{"code":"print('hello')"}`)
	if len(f.cells) != 1 {
		t.Errorf("got %d cells for a plain second run, want 1", len(f.cells))
	}
}

func TestExecuteErrors(t *testing.T) {
	f := &codeAPI{cell: func(req api.CodeRequest) (int, []api.CodeEvent) { return http.StatusNotFound, nil }}
	s, err := New(Config{API: f.handler(), Secret: bytes.Repeat([]byte{7}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"another language", `{"code":"1","language":"javascript"}`, 404, "Python only"},
		{"a context withruntime never makes", `{"code":"1","context_id":"nope"}`, 404, "no code context"},
		{"a context the API does not know", `{"code":"1","context_id":"ctx_00000000000000ff"}`, 404, "no code context"},
		{"not JSON", `{"code":`, 400, "not the JSON expected"},
	} {
		rec := execute(t, s, c.body)
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s: got %d %q, want %d with %q", c.name, rec.Code, rec.Body, c.status, c.want)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("%s: got Content-Type %q, want text (the clients show the body as the message)", c.name, ct)
		}
	}
}

func TestExecuteKeepalive(t *testing.T) {
	grace, every := codeHeaderGrace, codeKeepaliveEvery
	codeHeaderGrace, codeKeepaliveEvery = 10*time.Millisecond, 20*time.Millisecond
	defer func() { codeHeaderGrace, codeKeepaliveEvery = grace, every }()
	f := &codeAPI{cell: func(req api.CodeRequest) (int, []api.CodeEvent) {
		time.Sleep(300 * time.Millisecond) // a quiet cell
		return http.StatusOK, []api.CodeEvent{{Type: api.CodeEventStdout, Text: "late"}, {Type: api.CodeEventEnd, ExecutionCount: 2}}
	}}
	s, err := New(Config{API: f.handler(), Secret: bytes.Repeat([]byte{7}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	rec := execute(t, s, `{"code":"import time; time.sleep(0.3)","context_id":"default"}`)
	var types []string
	for _, l := range ndjson(t, rec.Body.Bytes()) {
		if l["type"] != lineKeepalive {
			types = append(types, l["type"].(string))
		} else if len(types) > 0 {
			t.Errorf("a keepalive line after the cell's output")
		}
	}
	if !strings.Contains(rec.Body.String(), `{"type":"keepalive"}`+"\n") {
		t.Errorf("no keepalive line in a quiet cell's stream: %s", rec.Body)
	}
	if got := strings.Join(types, " "); got != "stdout number_of_executions end_of_execution" {
		t.Errorf("got lines %s, want stdout number_of_executions end_of_execution", got)
	}
}

func TestContextRoutes(t *testing.T) {
	created := api.CreateContextRequest{}
	f := &codeAPI{contexts: []api.CodeContext{{ID: "default", Language: "python", Cwd: "/workspace"}}}
	mux := http.NewServeMux()
	mux.Handle("/", f.handler())
	mux.HandleFunc("POST /v1/sandboxes/run/contexts", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&created)
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(api.CodeContext{ID: "ctx_0123456789abcdef", Language: "python", Cwd: created.Cwd})
	})
	s, err := New(Config{API: mux, Secret: bytes.Repeat([]byte{7}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set(headerSandboxID, "run")
		req.Header.Set(headerSandboxPort, InterpreterPort)
		req.Header.Set(headerTrafficToken, s.sealToken("run", "wr_good")) // what /contexts carries
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	rec := call(http.MethodPost, "/contexts", `{"cwd":"data"}`)
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"id":"ctx_0123456789abcdef","language":"python","cwd":"/home/user/data"}` {
		t.Errorf("create: got %d %s", rec.Code, rec.Body)
	}
	if created.Cwd != "/home/user/data" || created.Language != "python" {
		t.Errorf("create asked the API for %+v, want cwd /home/user/data", created)
	}
	rec = call(http.MethodGet, "/contexts", "")
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `[{"id":"default","language":"python","cwd":"/home/user"}]` {
		t.Errorf("list: got %d %s", rec.Code, rec.Body)
	}
	rec = call(http.MethodPost, "/contexts", `{"language":"typescript"}`)
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), "Python only") {
		t.Errorf("create typescript: got %d %s, want 404 saying Python only", rec.Code, rec.Body)
	}
	mux.HandleFunc("DELETE /v1/sandboxes/run/contexts/{cid}", func(w http.ResponseWriter, r *http.Request) {
		created.Cwd = "deleted " + r.PathValue("cid")
		w.WriteHeader(http.StatusNoContent)
	})
	rec = call(http.MethodDelete, "/contexts/ctx_0123456789abcdef", "")
	if rec.Code != 204 || created.Cwd != "deleted ctx_0123456789abcdef" {
		t.Errorf("delete: got %d %s, the API saw %q", rec.Code, rec.Body, created.Cwd)
	}
	rec = call(http.MethodDelete, "/contexts/bogus", "")
	if rec.Code != 404 {
		t.Errorf("delete an id never made: got %d %s, want 404", rec.Code, rec.Body)
	}
}
