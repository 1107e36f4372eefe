package manager

import (
	"context"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
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
