package build

import (
	"testing"

	"github.com/withruntime/withruntime/internal/template"
)

// TestOutline: a Dockerfile's base and steps are known before the base is
// read, even where a step uses a name only the base's environment sets;
// Resolve with the base's defaults then gives the steps to run.
func TestOutline(t *testing.T) {
	s, err := Decode([]byte(`{"name": "app", "dockerfile": "FROM archive://img/app.tar\nRUN echo $FROM_IMAGE > /x\nUSER $IMG_USER\nCOPY a /a\n"}`))
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.Outline()
	if err != nil {
		t.Fatal(err)
	}
	if o.From == nil || o.From.Archive != "img/app.tar" || len(o.Steps) != 3 || o.Dockerfile != "" {
		t.Fatalf("Outline = %+v", o)
	}
	r, err := s.Resolve(func(f From) (template.Defaults, error) {
		return template.Defaults{Env: map[string]string{"FROM_IMAGE": "yes", "IMG_USER": "app"}, User: "imguser"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An archive's USER is its build steps' user, as an image's is.
	if r.Steps[0].User != "imguser" || r.Steps[1].User != "app" || len(r.Steps) != 3 {
		t.Errorf("Resolve = %s", show(r.Steps))
	}
	plain := &Spec{Name: "app", From: &From{Image: "python:3.12"}}
	if o, err := plain.Outline(); err != nil || o != plain {
		t.Errorf("Outline of a spec without a Dockerfile: %+v %v", o, err)
	}
}
