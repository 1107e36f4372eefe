package client

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/withruntime/withruntime/api"
)

func TestListOptionsSent(t *testing.T) {
	var got url.Values
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/list", func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Query()
		l := api.FileList{Entries: []api.FileInfo{{Name: "a"}, {Name: "b"}}}
		l.Truncated = got.Get("limit") == "2"
		writeJSON(w, 200, l)
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/processes", func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Query()
		p := api.Process{Pid: 7, Running: true}
		if got.Get("output") != "false" {
			p.SetOutput("out", "")
		}
		writeJSON(w, 200, api.ProcessList{Processes: []api.Process{p}})
	})
	c := newTestClient(t, mux)
	ctx := t.Context()

	l, err := c.ListFilesWith(ctx, "s", "d", ListFilesOptions{Limit: 2})
	if err != nil || len(l.Entries) != 2 || !l.Truncated {
		t.Fatalf("ListFilesWith: got %+v, %v, want 2 entries, truncated", l, err)
	}
	if got.Get("limit") != "2" || got.Get("path") != "d" {
		t.Errorf("ListFilesWith: got query %v, want limit=2 path=d", got)
	}
	if _, err := c.ListFiles(ctx, "s", "d"); err != nil || got.Has("limit") {
		t.Errorf("ListFiles: got query %v, %v, want no limit", got, err)
	}

	ps, err := c.ListProcessesWith(ctx, "s", ListProcessesOptions{NoOutput: true, Running: true})
	if err != nil || len(ps) != 1 || ps[0].Stdout != "" {
		t.Fatalf("ListProcessesWith: got %+v, %v, want one process without output", ps, err)
	}
	if got.Get("output") != "false" || got.Get("running") != "true" {
		t.Errorf("ListProcessesWith: got query %v, want output=false running=true", got)
	}
	if ps, err := c.ListProcesses(ctx, "s"); err != nil || len(got) != 0 || ps[0].Stdout != "out" {
		t.Errorf("ListProcesses: got %+v, query %v, %v, want the output and no query", ps, got, err)
	}
}
