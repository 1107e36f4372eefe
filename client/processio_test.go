package client

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
)

func TestFollowProcess(t *testing.T) {
	var gotQuery string
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" || r.URL.Path != "/v1/sandboxes/sbx_1/processes/9/stream" {
			writeError(w, 400, "invalid_request", r.Method+" "+r.URL.Path)
			return
		}
		gotQuery = r.URL.RawQuery
		streamEvents(w, api.ExecEvent{Type: "start", Pid: 9}, api.ExecEvent{Type: "stdout", Data: "out"},
			api.ExecEvent{Type: "stderr", Data: "err"}, api.ExecEvent{Type: "exit", ExitCode: intp(3), DurationMs: 5})
	}))
	var out strings.Builder
	res, err := c.FollowProcess(t.Context(), "sbx_1", 9, FollowOptions{StdoutOffset: 4, StderrOffset: 2}, ExecOptions{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if gotQuery != "stderr_offset=2&stdout_offset=4" {
		t.Errorf("got query %q, want both offsets", gotQuery)
	}
	if res.Pid != 9 || res.ExitCode != 3 || out.String() != "out" || res.Stderr != "err" {
		t.Errorf("got %+v with stdout %q, want pid 9, exit 3, out and err", res, out.String())
	}
}

func TestWriteProcessStdin(t *testing.T) {
	type got struct{ query, body, ct string }
	var reqs []got
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/sandboxes/sbx_1/processes/9/stdin" {
			writeError(w, 404, "not_found", "no process")
			return
		}
		b, _ := io.ReadAll(r.Body)
		reqs = append(reqs, got{r.URL.RawQuery, string(b), r.Header.Get("Content-Type")})
		w.WriteHeader(http.StatusNoContent)
	}))
	if err := c.WriteProcessStdin(t.Context(), "sbx_1", 9, []byte("a\x00b"), false); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteProcessStdin(t.Context(), "sbx_1", 9, nil, true); err != nil {
		t.Fatal(err)
	}
	want := []got{{"", "a\x00b", "application/octet-stream"}, {"close=true", "", "application/octet-stream"}}
	if len(reqs) != 2 || reqs[0] != want[0] || reqs[1] != want[1] {
		t.Errorf("got %+v, want %+v", reqs, want)
	}
	var apiErr *APIError
	if err := c.WriteProcessStdin(t.Context(), "sbx_1", 10, []byte("x"), false); !errors.As(err, &apiErr) || apiErr.Code != "not_found" {
		t.Errorf("got %v, want a not_found APIError", err)
	}
}

func TestAsFilesUser(t *testing.T) {
	var queries []string
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Query().Get("user"))
		writeJSON(w, 200, api.FileInfo{Name: "f"})
	}))
	root := c.AsFilesUser(api.UserRoot)
	if _, err := root.MakeDir(t.Context(), "sbx_1", "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.WriteFile(t.Context(), "sbx_1", "f", strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatFile(t.Context(), "sbx_1", "f"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"root", "root", ""}; strings.Join(queries, ",") != strings.Join(want, ",") {
		t.Errorf("got users %q, want %q: the copy acts as root, the original as before", queries, want)
	}
}
