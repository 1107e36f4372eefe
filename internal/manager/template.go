package manager

import (
	"context"
	"maps"

	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/template"
)

// Templates finds the template a create names (internal/templates): the
// account's own of that name and tag, else a public one.
type Templates interface {
	Resolve(ctx context.Context, account string, ref template.Ref) (*template.Template, error)
}

// withTemplate resolves the image a create names. The built-in image
// ("" or "default") gives no Root. A template gives its Root, and its
// defaults fill what the create left out: sizes, and environment
// variables the create does not set itself.
func (m *Manager) withTemplate(ctx context.Context, account string, req service.CreateRequest) (service.CreateRequest, *sandbox.Root, error) {
	if req.Image == "" || req.Image == image.DefaultName {
		req.Image = image.DefaultName
		return req, nil, nil
	}
	ref, err := template.ParseRef(req.Image)
	if err != nil {
		return req, nil, invalid("%v", err)
	}
	if m.cfg.Templates == nil {
		return req, nil, sandbox.Errorf(sandbox.KindNotFound, "no template %s: this server keeps none, its only image is %q", ref, image.DefaultName)
	}
	t, err := m.cfg.Templates.Resolve(ctx, account, ref)
	if err != nil {
		return req, nil, err
	}
	d := t.Defaults
	if req.VCPUs == 0 {
		req.VCPUs = d.VCPUs
	}
	if req.MemoryMiB == 0 {
		req.MemoryMiB = d.MemoryMiB
	}
	if len(d.Env) > 0 {
		env := maps.Clone(d.Env)
		maps.Copy(env, req.Env)
		req.Env = env
	}
	req.Image = ref.String()
	return req, &sandbox.Root{Template: t.ID, Base: t.Base, Layers: t.Layers}, nil
}
