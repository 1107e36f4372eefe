package manager

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/template"
)

// publicTemplates is a library whose templates every account sees (as
// published ones), and which a test may change.
type publicTemplates struct {
	mu sync.Mutex
	by map[template.Ref]template.Template
}

func (p *publicTemplates) set(t template.Template) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.by[t.Ref()] = t
}

func (p *publicTemplates) Resolve(_ context.Context, _ string, ref template.Ref) (*template.Template, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.by[ref]
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no template %s", ref)
	}
	return &t, nil
}

func TestParseTemplatePool(t *testing.T) {
	for in, want := range map[string]Pool{
		"2x4096=8":                  {VCPUs: 2, MemoryMiB: 4096, Size: 8},
		"app:1x1024=2":              {Template: "app:latest", VCPUs: 1, MemoryMiB: 1024, Size: 2},
		"myteam/app:v1:2x4096=4":    {Template: "myteam/app:v1", VCPUs: 2, MemoryMiB: 4096, Size: 4},
		"myteam/app:latest:1x512=0": {Template: "myteam/app:latest", VCPUs: 1, MemoryMiB: 512, Size: 0},
	} {
		got, err := ParsePool(in)
		if err != nil || got != want {
			t.Errorf("ParsePool(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := ParsePool(got.String()); err != nil || again != got {
			t.Errorf("ParsePool(%q) = %+v, %v; want it back", got.String(), again, err)
		}
	}
	for _, in := range []string{"App:1x1024=1", ":1x1024=1", "a/b/c:1x1024=1", "app:1x1024", "app:x=1", "app:"} {
		if got, err := ParsePool(in); err == nil {
			t.Errorf("ParsePool(%q) = %+v, want an error", in, got)
		}
	}
}

// TestTemplatePool: a template's pool boots members from the template,
// with its start command run at boot; a create of that template and size
// is a hit; once the name means another template, a member of the old one
// is not handed out and the pool refills with the new one.
func TestTemplatePool(t *testing.T) {
	lib := &publicTemplates{by: map[template.Ref]template.Template{}}
	v1 := template.Template{ID: "tpl_1", Account: "admin", Name: "web", Tag: "latest", Base: template.DefaultBase,
		Defaults: template.Defaults{StartCmd: "serve", Env: map[string]string{"MODE": "pool"}}}
	lib.set(v1)
	var mu sync.Mutex
	starts := 0
	// The fake agent is in place before Recover starts the filler, which
	// boots the first member at once.
	r := newRig(t, func(c *Config) {
		c.Pools = []Pool{{Template: "web:latest", VCPUs: 1, MemoryMiB: 1024, Size: 1}}
		c.Templates, c.AdminAccount = lib, "admin"
	})
	r.be.agent = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/exec" {
			mu.Lock()
			starts++
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			return
		}
		w.WriteHeader(http.StatusNoContent) // PUT /env at a claim
	})
	if err := r.m.Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	key := poolKey{template: "web:latest", vcpus: 1, memoryMiB: 1024}
	r.waitPool(key, 1)
	mu.Lock()
	if starts != 1 {
		t.Errorf("the member's start command ran %d times at boot, want 1", starts)
	}
	mu.Unlock()
	member := ""
	for id := range r.members(key) {
		member = id
	}
	rec := r.create(service.CreateRequest{Image: "web", VCPUs: 1, MemoryMiB: 1024})
	if rec.ID != member || rec.Spec.Root == nil || rec.Spec.Root.Template != "tpl_1" {
		t.Fatalf("a create of the template: got %s (root %+v), want the member %s", rec.ID, rec.Spec.Root, member)
	}
	// The default image's creates of that size are no hit.
	r.waitPool(key, 1)
	if other := r.create(service.CreateRequest{VCPUs: 1, MemoryMiB: 1024}); r.members(key)[other.ID] || other.Spec.Root != nil {
		t.Errorf("a create of the default image took a template's member")
	}

	// The name moves to another template: the waiting member is not
	// handed out, and the pool refills with the new template.
	stale := ""
	for id := range r.members(key) {
		stale = id
	}
	lib.set(template.Template{ID: "tpl_2", Account: "admin", Name: "web", Tag: "latest", Base: template.DefaultBase})
	rec2 := r.create(service.CreateRequest{Image: "web", VCPUs: 1, MemoryMiB: 1024})
	if rec2.ID == stale || rec2.Spec.Root.Template != "tpl_2" {
		t.Errorf("a create after the name moved got %s of %s, the stale member was %s", rec2.ID, rec2.Spec.Root.Template, stale)
	}
	r.waitPool(key, 1)
	r.m.pools.mu.Lock()
	defer r.m.pools.mu.Unlock()
	for _, mem := range r.m.pools.ready[key] {
		if mem.template != "tpl_2" {
			t.Errorf("the pool refilled with %s, want tpl_2", mem.template)
		}
	}
}
