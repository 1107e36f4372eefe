package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/template"
)

// oneTemplate is a template library of one template of account "acct".
type oneTemplate struct{ t template.Template }

func (o oneTemplate) Resolve(_ context.Context, account string, ref template.Ref) (*template.Template, error) {
	if account != o.t.Account || ref != o.t.Ref() {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no template %s", ref)
	}
	t := o.t
	return &t, nil
}

// TestSpecFromTemplate: a template's defaults fill what the create left
// out, the create's own values win, and the spec carries the template's
// layers for the backend.
func TestSpecFromTemplate(t *testing.T) {
	digest := "sha256:" + "ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789cdef"[:64]
	m := &Manager{cfg: Config{Backend: namedFake{newFakeBackend(), sandbox.IsolationGVisor}, Templates: oneTemplate{template.Template{
		ID: "tpl_0123456789abcdef", Account: "acct", Name: "team/app", Tag: "v1", Base: template.DefaultBase, Layers: []string{digest},
		Defaults: template.Defaults{VCPUs: 4, MemoryMiB: 1024, Env: map[string]string{"A": "template", "B": "template"}},
	}}}}
	m.cfg.setDefaults()
	s, err := m.specFor(t.Context(), "acct", service.CreateRequest{Image: "team/app:v1", MemoryMiB: 2048, Env: map[string]string{"B": "create"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Image != "team/app:v1" || s.VCPUs != 4 || s.MemoryMiB != 2048 || s.Env["A"] != "template" || s.Env["B"] != "create" {
		t.Errorf("got spec %+v", s)
	}
	if s.Root == nil || s.Root.Template != "tpl_0123456789abcdef" || s.Root.Base != "default" || len(s.Root.Layers) != 1 || s.Root.Layers[0] != digest {
		t.Errorf("got root %+v", s.Root)
	}
	for name, req := range map[string]service.CreateRequest{
		"another account's template": {Image: "team/app:v1"},
		"another tag":                {Image: "team/app:v2"},
	} {
		account := "acct"
		if name == "another account's template" {
			account = "other"
		}
		if _, err := m.specFor(t.Context(), account, req); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("%s: got %v, want not_found", name, err)
		}
	}
	// The template's sizes are checked as a create's own would be.
	m.cfg.Templates = oneTemplate{template.Template{ID: "tpl_1", Account: "acct", Name: "big", Tag: "latest", Defaults: template.Defaults{VCPUs: 99}}}
	if _, err := m.specFor(t.Context(), "acct", service.CreateRequest{Image: "big"}); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("a template's vcpus over the limit: got %v, want invalid_request", err)
	}
}

// TestTemplateStartAndReady: a template's start command is started in the
// background once the sandbox is up, and the create answers only once its
// ready command exits 0; a ready command that never does fails the
// create, and the sandbox goes.
func TestTemplateStartAndReady(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	readyAfter := 3
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Cmd        json.RawMessage `json:"cmd"`
			Background bool            `json:"background"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		// Plain words come as argv, anything else as a shell string.
		var argv []string
		var cmd string
		if json.Unmarshal(req.Cmd, &argv) == nil {
			cmd = strings.Join(argv, " ")
		} else {
			json.Unmarshal(req.Cmd, &cmd)
			cmd = "sh:" + cmd
		}
		mu.Lock()
		calls = append(calls, cmd)
		tries := len(calls)
		mu.Unlock()
		if req.Background {
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"pid":7}`)
			return
		}
		code := 1
		if tries > readyAfter {
			code = 0
		}
		fmt.Fprintf(w, "{\"type\":\"start\",\"pid\":8}\n{\"type\":\"exit\",\"exit_code\":%d}\n", code)
	})
	tpl := template.Template{ID: "tpl_0123456789abcdef", Account: "acct", Name: "web", Tag: "latest", Base: template.DefaultBase,
		Defaults: template.Defaults{StartCmd: "serve --port 8000", ReadyCmd: "check | grep ok", ReadyTimeoutSeconds: 30, Workdir: "/srv", User: "root"}}
	r := newRig(t, func(c *Config) { c.Templates = oneTemplate{tpl} })
	r.be.agent = agent
	rec := r.create(service.CreateRequest{Image: "web"})
	if want := []string{"serve --port 8000", "sh:check | grep ok", "sh:check | grep ok", "sh:check | grep ok"}; !slices.Equal(calls, want) {
		t.Errorf("the agent was asked %q, want %q", calls, want)
	}
	if rec.State != sandbox.StateRunning || rec.Spec.Workdir != "/srv" || rec.Spec.User != "root" || rec.Spec.StartCmd != "serve --port 8000" {
		t.Errorf("got record %+v", rec)
	}

	// A ready command that never succeeds: the create fails, and the
	// sandbox does not stay.
	mu.Lock()
	calls, readyAfter = nil, 1<<30
	mu.Unlock()
	tpl.Defaults.ReadyTimeoutSeconds = 1
	r.m.cfg.Templates = oneTemplate{tpl}
	_, err := r.m.Create(t.Context(), "acct", "", service.CreateRequest{Image: "web"})
	if sandbox.KindOf(err) != sandbox.KindInvalid || !strings.Contains(err.Error(), "ready command") {
		t.Fatalf("got %v, want invalid_request about the ready command", err)
	}
	recs, err := r.st.ListSandboxes(t.Context(), store.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range recs {
		if x.ID != rec.ID && x.State != sandbox.StateEnded {
			t.Errorf("the sandbox whose ready command failed is %s", x.State)
		}
	}

	// A template's defaults are checked as a create's would be.
	for _, d := range []template.Defaults{{Workdir: "relative"}, {Workdir: "/a/../b"}, {User: "admin"}, {ReadyCmd: "x", ReadyTimeoutSeconds: 3600}} {
		tpl.Defaults = d
		r.m.cfg.Templates = oneTemplate{tpl}
		if _, err := r.m.Create(t.Context(), "acct", "", service.CreateRequest{Image: "web"}); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("defaults %+v: got %v, want invalid_request", d, err)
		}
	}
}

func TestWords(t *testing.T) {
	for in, want := range map[string][]string{
		"python3 -m http.server 8000":       {"python3", "-m", "http.server", "8000"},
		`'/bin/app' '--flag=a b' 'it'\''s'`: {"/bin/app", "--flag=a b", "it's"},
		"  a\tb ":                           {"a", "b"},
	} {
		if got, ok := words(in); !ok || !slices.Equal(got, want) {
			t.Errorf("words(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "a | b", "echo $HOME", "a; b", "x > y", "'unclosed", "a*", "$(id)", "a && b"} {
		if got, ok := words(in); ok {
			t.Errorf("words(%q) = %q, want the shell", in, got)
		}
	}
}
