package httpapi

import (
	"context"
	"io"
	"net/http"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// Templates is the template library (internal/templates.Library). Names
// are "name" or "name:tag" as the caller wrote them; errors carry a
// sandbox.Kind.
type Templates interface {
	List(ctx context.Context, account string) ([]*template.Template, error)
	Get(ctx context.Context, account, name string) (*template.Template, error)
	Delete(ctx context.Context, account, name string) (*template.Template, error)
	Snapshot(ctx context.Context, account, id, name string) (*template.Template, error)
	Import(ctx context.Context, account, name string, archive io.Reader) (*template.Template, error)
	ImportRef(ctx context.Context, account, name, imageRef string) (*template.Template, error)
	Publish(ctx context.Context, account, name string, public bool) (*template.Template, error)
	// Build starts a build of the JSON specification spec with the build
	// context (a tar, or nil) and answers at once; GetBuild and BuildLogs
	// show it to its account only.
	// size is the build sandboxes' (a trial account's is cut to the
	// trial's size here, as a create's is).
	Build(ctx context.Context, account, keyID string, spec []byte, context io.Reader, size template.BuildSize) (*template.Build, error)
	GetBuild(ctx context.Context, account, id string) (*template.Build, error)
	BuildLogs(ctx context.Context, account, id string, follow bool, fn func(template.BuildEvent) error) error
}

// templates returns the configured library, or the error that says this
// server keeps no templates.
func (s *server) templates() (Templates, error) {
	if s.cfg.Templates == nil {
		return nil, sandbox.Errorf(sandbox.KindNotSupported, "this server keeps no templates")
	}
	return s.cfg.Templates, nil
}

// TemplateView is a template as the API shows it.
func TemplateView(t *template.Template) api.Template {
	d := t.Defaults
	return api.Template{
		ID: t.ID, Name: t.Name, Tag: t.Tag, Public: t.Public, Source: t.Source, Base: t.Base,
		Layers: len(t.Layers), SizeBytes: t.SizeBytes, CreatedAt: t.CreatedAt, State: t.State(),
		Defaults: api.Defaults{
			Env: d.Env, Workdir: d.Workdir, User: d.User, VCPUs: d.VCPUs, MemoryMiB: d.MemoryMiB,
			StartCmd: d.StartCmd, ReadyCmd: d.ReadyCmd, ReadyTimeoutSeconds: d.ReadyTimeoutSeconds,
		},
	}
}

func (s *server) listTemplates(w http.ResponseWriter, r *http.Request, c caller) error {
	lib, err := s.templates()
	if err != nil {
		return err
	}
	ts, err := lib.List(r.Context(), c.account)
	if err != nil {
		return err
	}
	out := api.TemplateList{Templates: make([]api.Template, 0, len(ts))}
	for _, t := range ts {
		out.Templates = append(out.Templates, TemplateView(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getTemplate(w http.ResponseWriter, r *http.Request, c caller) error {
	lib, err := s.templates()
	if err != nil {
		return err
	}
	t, err := lib.Get(r.Context(), c.account, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, TemplateView(t))
	return nil
}

func (s *server) deleteTemplate(w http.ResponseWriter, r *http.Request, c caller) error {
	lib, err := s.templates()
	if err != nil {
		return err
	}
	t, err := lib.Delete(r.Context(), c.account, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, TemplateView(t))
	return nil
}

func (s *server) snapshot(w http.ResponseWriter, r *http.Request, c caller) error {
	lib, err := s.templates()
	if err != nil {
		return err
	}
	var req api.SnapshotRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		return err
	}
	id := r.PathValue("id")
	infoFrom(r.Context()).sandboxID = id
	t, err := lib.Snapshot(r.Context(), c.account, id, req.Template)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, TemplateView(t))
	return nil
}

// importTemplate reads the image archive from the body as it comes (the
// library bounds what it writes, so the body is not bounded here), or,
// with ?ref=, from a registry.
func (s *server) importTemplate(w http.ResponseWriter, r *http.Request, c caller) error {
	lib, err := s.templates()
	if err != nil {
		return err
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "the query parameter name (the template's name[:tag]) is required")
	}
	var t *template.Template
	if ref := r.URL.Query().Get("ref"); ref != "" {
		// The image is the registry's: the body must be empty.
		var one [1]byte
		if n, _ := io.ReadFull(r.Body, one[:]); n > 0 {
			return sandbox.Errorf(sandbox.KindInvalid, "an import of ref %q takes no body", ref)
		}
		t, err = lib.ImportRef(r.Context(), c.account, name, ref)
	} else {
		t, err = lib.Import(r.Context(), c.account, name, r.Body)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, TemplateView(t))
	return nil
}

func (s *server) publishTemplate(w http.ResponseWriter, r *http.Request, c caller) error {
	lib, err := s.templates()
	if err != nil {
		return err
	}
	var req api.PublishRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		return err
	}
	t, err := lib.Publish(r.Context(), c.account, r.PathValue("name"), req.Public)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, TemplateView(t))
	return nil
}
