package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

var tplCreated = time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC)

// templateRoutes serve templates by "name:tag" (the tag latest when a
// route leaves it out), an import that takes a body starting "image:",
// and snapshots of sbx_a.
func (f *fakeServer) templateRoutes(mux *http.ServeMux) {
	key := func(name string) string {
		if !strings.Contains(name, ":") {
			name += ":latest"
		}
		return name
	}
	add := func(name string, t api.Template) api.Template {
		t.Name, t.Tag, _ = strings.Cut(key(name), ":")
		t.ID = "tpl_" + strings.Repeat("0", 15) + string(rune('a'+len(f.templates)))
		t.CreatedAt, t.State = tplCreated, "ready"
		if f.templates == nil {
			f.templates = map[string]api.Template{}
		}
		f.templates[key(name)] = t
		return t
	}
	mux.HandleFunc("GET /v1/templates", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		l := api.TemplateList{Templates: []api.Template{}}
		keys := make([]string, 0, len(f.templates))
		for k := range f.templates {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			l.Templates = append(l.Templates, f.templates[k])
		}
		writeJSON(w, 200, l)
	})
	one := func(remove bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			defer f.mu.Unlock()
			t, ok := f.templates[key(r.PathValue("name"))]
			if !ok {
				writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no template " + r.PathValue("name")}})
				return
			}
			if remove {
				delete(f.templates, key(r.PathValue("name")))
			}
			writeJSON(w, 200, t)
		}
	}
	mux.HandleFunc("GET /v1/templates/{name}", one(false))
	mux.HandleFunc("DELETE /v1/templates/{name}", one(true))
	mux.HandleFunc("POST /v1/templates/import", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.imports = append(f.imports, string(b))
		if !bytes.HasPrefix(b, []byte("image:")) {
			writeJSON(w, 400, api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_request", Message: "the body is not an image archive"}})
			return
		}
		writeJSON(w, 201, add(r.URL.Query().Get("name"), api.Template{Source: "oci", Layers: 2, SizeBytes: int64(len(b)),
			Defaults: api.Defaults{Workdir: "/app", User: "app", Env: map[string]string{"B": "2", "A": "1"}, StartCmd: "python3 -m http.server"}}))
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/snapshot", func(w http.ResponseWriter, r *http.Request) {
		var req api.SnapshotRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.PathValue("id") != "sbx_a" {
			writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no sandbox " + r.PathValue("id")}})
			return
		}
		writeJSON(w, 201, add(req.Template, api.Template{Source: "snapshot", Base: "default", Layers: 1, SizeBytes: 3 << 20}))
	})
}

func TestTemplateCommands(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	archive := filepath.Join(t.TempDir(), "app.tar")
	if err := os.WriteFile(archive, []byte("image:"+strings.Repeat("x", 2000)), 0o644); err != nil {
		t.Fatal(err)
	}

	// import from a file and from standard input.
	code, stdout, stderr := run(t, nil, "template", "import", "-t", "myteam/app:v1", archive)
	if code != 0 || stdout != "myteam/app:v1\ttpl_000000000000000a\n" || stderr != "" {
		t.Fatalf("import: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = runStdin(t, strings.NewReader("image:piped"), "template", "import", "--template", "piped", "--json", "-")
	var imp api.Template
	if err := json.Unmarshal([]byte(stdout), &imp); err != nil || code != 0 || imp.Name != "piped" || imp.Tag != "latest" || imp.SizeBytes != int64(len("image:piped")) {
		t.Fatalf("import -: exit %d stdout %q stderr %q (%v)", code, stdout, stderr, err)
	}
	if got := f.imports[1]; got != "image:piped" {
		t.Errorf("import - sent %q, want standard input as it was", got)
	}

	// a snapshot prints NAME:TAG and the id.
	code, stdout, stderr = run(t, nil, "sandbox", "snapshot", "sbx_a", "-t", "snap")
	if code != 0 || stdout != "snap:latest\ttpl_000000000000000c\n" {
		t.Fatalf("snapshot: exit %d stdout %q stderr %q", code, stdout, stderr)
	}

	code, stdout, stderr = run(t, nil, "template", "ls")
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	created := tplCreated.Local().Format(time.RFC3339)
	want := [][]string{
		{"NAME", "TAG", "SOURCE", "SIZE", "LAYERS", "CREATED"},
		{"myteam/app", "v1", "oci", "2.0KiB", "2", created},
		{"piped", "latest", "oci", "11B", "2", created},
		{"snap", "latest", "snapshot", "3.0MiB", "1", created},
	}
	if code != 0 || !reflect.DeepEqual(rows, want) {
		t.Errorf("ls: exit %d stderr %q, got\n%q\nwant\n%q", code, stderr, rows, want)
	}
	code, stdout, _ = run(t, nil, "template", "ls", "--json")
	var l api.TemplateList
	if err := json.Unmarshal([]byte(stdout), &l); err != nil || code != 0 || len(l.Templates) != 3 || l.Templates[2].Source != "snapshot" {
		t.Errorf("ls --json: exit %d, %v, %q", code, err, stdout)
	}

	code, stdout, _ = run(t, nil, "template", "get", "myteam/app:v1", "--json")
	var got api.Template
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 0 || got.ID != "tpl_000000000000000a" || got.Defaults.Workdir != "/app" {
		t.Errorf("get --json: exit %d, %v, %q", code, err, stdout)
	}
	code, stdout, _ = run(t, nil, "template", "get", "myteam/app:v1")
	for _, w := range []string{"Name:", "myteam/app:v1", "Source:", "oci", "Workdir:", "/app", "User:", "app",
		"Start command:", "python3 -m http.server", "Env:", "A=1"} {
		if code != 0 || !strings.Contains(stdout, w) {
			t.Errorf("get: exit %d, %q lacks %q", code, stdout, w)
		}
	}
	if strings.Index(stdout, "A=1") > strings.Index(stdout, "B=2") {
		t.Errorf("get: env not sorted by name:\n%s", stdout)
	}

	// rm goes on past a failure, exits 1 and prints what it removed.
	code, stdout, stderr = run(t, nil, "template", "rm", "piped", "nope", "snap:latest")
	if code != 1 || stdout != "piped:latest\nsnap:latest\n" || stderr != "error: not_found: no template nope\n" {
		t.Errorf("rm: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, _, stderr = run(t, nil, "template", "get", "piped")
	if code != 1 || stderr != "error: not_found: no template piped\n" {
		t.Errorf("get after rm: exit %d stderr %q", code, stderr)
	}
}

func TestTemplateCommandFailures(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	notImage := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notImage, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"template", "import", "app.tar"}, 2, "-t NAME[:TAG] is required"},
		{[]string{"template", "import", "-t", "app"}, 2, "want one ARCHIVE"},
		{[]string{"template", "import", "-t", "app", filepath.Join(t.TempDir(), "missing.tar")}, 1, "error: invalid_request: open "},
		{[]string{"template", "import", "-t", "app", t.TempDir()}, 1, "is not a regular file"},
		{[]string{"template", "import", "-t", "app", notImage}, 1, "error: invalid_request: the body is not an image archive\n"},
		{[]string{"template", "get"}, 2, "want one template NAME[:TAG]"},
		{[]string{"template", "get", "nope"}, 1, "error: not_found: no template nope\n"},
		{[]string{"template", "get", "a/../b"}, 1, `error: invalid_request: bad template name "a/../b"`},
		{[]string{"template", "rm"}, 2, "want at least one template NAME[:TAG]"},
		{[]string{"sandbox", "snapshot", "sbx_a", "-t", "x", "--name", "y"}, 2, "--name labels a snapshot, -t makes a template"},
		{[]string{"sandbox", "snapshot", "-t", "x"}, 2, "want one sandbox ID"},
		{[]string{"sandbox", "snapshot", "sbx_zz", "-t", "x"}, 1, "error: not_found: no sandbox sbx_zz\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, nil, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) || stdout != "" {
				t.Errorf("got exit %d stdout %q stderr %q, want %d and %q", code, stdout, stderr, tt.wantCode, tt.wantStderr)
			}
		})
	}
	if len(f.templates) != 0 {
		t.Errorf("a failure made templates: %v", f.templates)
	}
}

func TestCreateWithTemplate(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	for _, args := range [][]string{
		{"sandbox", "create", "--template", "myteam/app:v1"},
		{"sandbox", "run", "--template", "myteam/app", "--", "true"},
		{"sandbox", "create", "--image", "default"},
	} {
		if code, _, stderr := run(t, nil, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	created, _, _ := f.snapshot()
	var got [][2]string
	for _, c := range created {
		got = append(got, [2]string{c.Template, c.Image})
	}
	want := [][2]string{{"myteam/app:v1", ""}, {"myteam/app", ""}, {"", "default"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("template and image sent: got %q, want %q", got, want)
	}
}
