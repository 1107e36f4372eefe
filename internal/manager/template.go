package manager

import (
	"context"
	"maps"
	"path"
	"strings"
	"time"

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
// variables the create does not set itself. The template comes back for
// what else it gives the spec (its Root, withDefaults).
func (m *Manager) withTemplate(ctx context.Context, account string, req service.CreateRequest) (service.CreateRequest, *template.Template, error) {
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
	return req, t, nil
}

// The bounds of a template's ready command: how long a create waits for
// it by default and at most, and how long one try may take.
const (
	defaultReadyTimeout = time.Minute
	maxReadyTimeout     = 10 * time.Minute
	readyTry            = 10 * time.Second
)

// withDefaults sets what the template t gives a sandbox besides its file
// system and sizes: the directory and user of its commands, and its start
// and ready commands. A template's values are checked as a create's would
// be: the store holds what any writer put there.
func withDefaults(s *sandbox.Spec, d template.Defaults) error {
	if d.Workdir != "" && (!path.IsAbs(d.Workdir) || path.Clean(d.Workdir) != d.Workdir || strings.ContainsRune(d.Workdir, 0)) {
		return invalid("the template's workdir %q is not a clean absolute path", d.Workdir)
	}
	switch d.User {
	case "", "user", "root":
	default:
		return invalid("the template's user %q is neither \"user\" nor \"root\"", d.User)
	}
	if d.ReadyTimeoutSeconds < 0 || time.Duration(d.ReadyTimeoutSeconds)*time.Second > maxReadyTimeout {
		return invalid("the template's ready_timeout_seconds must be between 0 and %d", int(maxReadyTimeout/time.Second))
	}
	s.Workdir, s.User, s.StartCmd, s.ReadyCmd = d.Workdir, d.User, d.StartCmd, d.ReadyCmd
	if s.ReadyCmd != "" {
		s.ReadyTimeout = time.Duration(d.ReadyTimeoutSeconds) * time.Second
		if s.ReadyTimeout == 0 {
			s.ReadyTimeout = defaultReadyTimeout
		}
	}
	return nil
}
