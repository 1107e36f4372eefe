package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// templateServer is a fake of the template routes that keeps templates by
// "name:tag" and records each call's method and escaped path.
type templateServer struct {
	mu        sync.Mutex
	calls     []string
	templates map[string]api.Template
	imported  []byte // the body of the last import
	importCT  string
	snapshots []api.SnapshotRequest
}

var tplCreated = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func (f *templateServer) record(r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.EscapedPath()+query(r))
}

func query(r *http.Request) string {
	if r.URL.RawQuery == "" {
		return ""
	}
	return "?" + r.URL.RawQuery
}

// ref is the store's key of a route's name: the tag is latest when absent.
func ref(name string) string {
	if !strings.Contains(name, ":") {
		return name + ":latest"
	}
	return name
}

func (f *templateServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/templates", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		f.mu.Lock()
		defer f.mu.Unlock()
		l := api.TemplateList{Templates: []api.Template{}}
		for _, k := range []string{"app:latest", "myteam/app:v1"} {
			if t, ok := f.templates[k]; ok {
				l.Templates = append(l.Templates, t)
			}
		}
		writeJSON(w, 200, l)
	})
	one := func(remove bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			f.record(r)
			f.mu.Lock()
			defer f.mu.Unlock()
			k := ref(r.PathValue("name"))
			t, ok := f.templates[k]
			if !ok {
				writeError(w, 404, "not_found", "no template "+r.PathValue("name"))
				return
			}
			if remove {
				delete(f.templates, k)
				t.State = "deleting"
			}
			writeJSON(w, 200, t)
		}
	}
	mux.HandleFunc("GET /v1/templates/{name}", one(false))
	mux.HandleFunc("DELETE /v1/templates/{name}", one(true))
	mux.HandleFunc("POST /v1/templates/import", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		b, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, 400, "invalid_request", err.Error())
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.imported, f.importCT = b, r.Header.Get("Content-Type")
		if !bytes.HasPrefix(b, []byte("image:")) {
			writeError(w, 400, "invalid_request", "the body is not an image archive")
			return
		}
		name, tag, _ := strings.Cut(ref(r.URL.Query().Get("name")), ":")
		t := api.Template{ID: "tpl_00000000000000aa", Name: name, Tag: tag, Source: "oci", Layers: 1,
			SizeBytes: int64(len(b)), CreatedAt: tplCreated, State: "ready"}
		f.templates[name+":"+tag] = t
		writeJSON(w, 201, t)
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/snapshot", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		var req api.SnapshotRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, 400, "invalid_request", err.Error())
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.snapshots = append(f.snapshots, req)
		if r.PathValue("id") != "sbx_a" {
			writeError(w, 404, "not_found", "no sandbox "+r.PathValue("id"))
			return
		}
		name, tag, _ := strings.Cut(ref(req.Template), ":")
		t := api.Template{ID: "tpl_00000000000000bb", Name: name, Tag: tag, Source: "snapshot", Base: "default",
			Layers: 1, SizeBytes: 4096, CreatedAt: tplCreated, State: "ready"}
		f.templates[name+":"+tag] = t
		writeJSON(w, 201, t)
	})
	return mux
}

func (f *templateServer) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func TestTemplates(t *testing.T) {
	f := &templateServer{templates: map[string]api.Template{}}
	c := newTestClient(t, f.handler())
	ctx := t.Context()

	// An import streams the archive and names the template in the query.
	archive := "image:" + strings.Repeat("x", 100<<10)
	imp, err := c.ImportTemplate(ctx, "myteam/app:v1", strings.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if imp.Name != "myteam/app" || imp.Tag != "v1" || imp.Source != "oci" || imp.SizeBytes != int64(len(archive)) {
		t.Errorf("ImportTemplate: got %+v", imp)
	}
	if string(f.imported) != archive || f.importCT != "application/x-tar" {
		t.Errorf("import body: got %d bytes (%q), want the %d bytes sent as application/x-tar", len(f.imported), f.importCT, len(archive))
	}
	if _, err := c.ImportTemplate(ctx, "bad", strings.NewReader("not an image")); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("ImportTemplate of a non-image: got %v, want invalid_request", err)
	}

	// A snapshot sends the name in the body; the sandbox is in the route.
	snap, err := c.Snapshot(ctx, "sbx_a", "app")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Name != "app" || snap.Tag != "latest" || snap.Source != "snapshot" || snap.ID != "tpl_00000000000000bb" {
		t.Errorf("Snapshot: got %+v", snap)
	}
	if _, err := c.Snapshot(ctx, "sbx_gone", "app"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Snapshot of an unknown sandbox: got %v, want not_found", err)
	}
	if want := []api.SnapshotRequest{{Template: "app"}, {Template: "app"}}; !reflect.DeepEqual(f.snapshots, want) {
		t.Errorf("snapshot bodies: got %+v, want %+v", f.snapshots, want)
	}

	list, err := c.ListTemplates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "app" || list[1].Name != "myteam/app" {
		t.Errorf("ListTemplates: got %+v", list)
	}

	// "/" in a name stays a separator; the tag rides along after ":".
	got, err := c.GetTemplate(ctx, "myteam/app:v1")
	if err != nil || got.ID != "tpl_00000000000000aa" {
		t.Errorf("GetTemplate(myteam/app:v1): got %+v, %v", got, err)
	}
	if _, err := c.GetTemplate(ctx, "myteam/app"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetTemplate(myteam/app) (tag latest): got %v, want not_found", err)
	}
	del, err := c.DeleteTemplate(ctx, "app")
	if err != nil || del.State != "deleting" {
		t.Errorf("DeleteTemplate(app): got %+v, %v", del, err)
	}
	if _, err := c.DeleteTemplate(ctx, "app"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteTemplate twice: got %v, want not_found", err)
	}

	wantCalls := []string{
		"POST /v1/templates/import?name=myteam%2Fapp%3Av1",
		"POST /v1/templates/import?name=bad",
		"POST /v1/sandboxes/sbx_a/snapshot",
		"POST /v1/sandboxes/sbx_gone/snapshot",
		"GET /v1/templates",
		"GET /v1/templates/myteam%2Fapp:v1",
		"GET /v1/templates/myteam%2Fapp",
		"DELETE /v1/templates/app",
		"DELETE /v1/templates/app",
	}
	if calls := f.takeCalls(); !reflect.DeepEqual(calls, wantCalls) {
		t.Errorf("calls:\n got %q\nwant %q", calls, wantCalls)
	}
}

// TestTemplateNamesStayInTheirRoute checks that no name reaches another
// route: each part is escaped, and parts an HTTP stack may clean away are
// refused before anything is sent.
func TestTemplateNamesStayInTheirRoute(t *testing.T) {
	f := &templateServer{templates: map[string]api.Template{}}
	c := newTestClient(t, f.handler())
	ctx := t.Context()

	escaped := []struct{ name, path string }{
		{"a b", "/v1/templates/a%20b"},
		{"a?b", "/v1/templates/a%3Fb"},
		{"a#b:v1", "/v1/templates/a%23b:v1"},
		{"team/a%2Fb", "/v1/templates/team%2Fa%252Fb"},
	}
	for _, tt := range escaped {
		if _, err := c.GetTemplate(ctx, tt.name); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetTemplate(%q): got %v, want the fake's not_found", tt.name, err)
		}
		if calls := f.takeCalls(); len(calls) != 1 || calls[0] != "GET "+tt.path {
			t.Errorf("GetTemplate(%q): got calls %q, want GET %s", tt.name, calls, tt.path)
		}
	}

	for _, name := range []string{"", "/", "/app", "app/", "team//app", "..", "../secrets/K", "team/..", "./app", "team/./app"} {
		_, getErr := c.GetTemplate(ctx, name)
		_, delErr := c.DeleteTemplate(ctx, name)
		for _, err := range []error{getErr, delErr} {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("name %q: got %v, want invalid_request", name, err)
			}
		}
	}
	for _, err := range []error{
		func() error { _, err := c.Snapshot(ctx, "sbx_a", ""); return err }(),
		func() error { _, err := c.ImportTemplate(ctx, "", strings.NewReader("image:")); return err }(),
	} {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("empty name: got %v, want invalid_request", err)
		}
	}
	if calls := f.takeCalls(); len(calls) != 0 {
		t.Errorf("refused names were sent: %q", calls)
	}
}
