package templates

import (
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/template"
)

// TestBaseKey: a template made over the built-in image records that
// image's key; once the server's image is another (an upgrade rebuilt it),
// creating or building from the template is refused (conflict, saying to
// remake it) while it is still shown and removed; a template recorded
// before the key was (none) and one of an imported image (no base) start
// as before.
func TestBaseKey(t *testing.T) {
	r := newRig(t, store.TemplateQuota{})
	ctx := t.Context()
	r.lib.cfg.DefaultImageKey = "image-v1"
	r.ex.trees["sbxa"] = upper(t, map[string]string{"workspace/a.txt": "a"})
	a, err := r.lib.Snapshot(ctx, "acct", "sbxa", "app")
	if err != nil {
		t.Fatal(err)
	}
	if a.Base != template.DefaultBase || a.BaseKey != "image-v1" {
		t.Fatalf("a snapshot over the built-in image: base %q key %q, want %q %q", a.Base, a.BaseKey, template.DefaultBase, "image-v1")
	}
	// A snapshot of a sandbox of that template keeps its key.
	r.ex.roots["sbxb"] = &sandbox.Root{Template: a.ID, Base: a.Base, Layers: a.Layers}
	r.ex.trees["sbxb"] = upper(t, map[string]string{"workspace/b.txt": "b"})
	r.lib.cfg.DefaultImageKey = "image-v1b"
	b, err := r.lib.Snapshot(ctx, "acct", "sbxb", "app2")
	if err != nil {
		t.Fatal(err)
	}
	if b.BaseKey != "image-v1" {
		t.Fatalf("a snapshot over a template: key %q, want its parent's %q", b.BaseKey, "image-v1")
	}
	ref := template.Ref{Name: "app", Tag: template.DefaultTag}

	// The upgrade: another image.
	r.lib.cfg.DefaultImageKey = "image-v2"
	_, err = r.lib.Resolve(ctx, "acct", ref)
	if sandbox.KindOf(err) != sandbox.KindConflict || !strings.Contains(sandbox.MessageOf(err), "rebuild or re-import") {
		t.Fatalf("a template over the old image: got %v, want conflict saying to remake it", err)
	}
	if _, err := r.lib.Get(ctx, "acct", "app"); err != nil {
		t.Fatalf("showing it: %v", err)
	}
	// Kept for the old image: it starts again on a server of that image.
	r.lib.cfg.DefaultImageKey = "image-v1"
	if _, err := r.lib.Resolve(ctx, "acct", ref); err != nil {
		t.Fatalf("on the image it was made over: %v", err)
	}
	r.lib.cfg.DefaultImageKey = "image-v2"
	if _, err := r.lib.Delete(ctx, "acct", "app"); err != nil {
		t.Fatalf("removing it: %v", err)
	}

	// Recorded before the key was: starts as it did.
	old := &template.Template{ID: template.NewID(), Account: "acct", Name: "legacy", Tag: template.DefaultTag,
		Source: template.SourceSnapshot, Base: template.DefaultBase, Layers: a.Layers, CreatedAt: r.now}
	if err := r.st.PutTemplate(ctx, old, store.TemplateQuota{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.lib.Resolve(ctx, "acct", old.Ref()); err != nil {
		t.Fatalf("a template without a key: %v", err)
	}
	// An image's own file system has no base, so no key.
	img := &template.Template{ID: template.NewID(), Account: "acct", Name: "img", Tag: template.DefaultTag,
		Source: template.SourceOCI, Layers: a.Layers, CreatedAt: r.now}
	if err := r.lib.record(ctx, img); err != nil {
		t.Fatal(err)
	}
	if img.BaseKey != "" {
		t.Errorf("an imported image: key %q, want none", img.BaseKey)
	}
	if _, err := r.lib.Resolve(ctx, "acct", img.Ref()); err != nil {
		t.Fatalf("an imported image after the upgrade: %v", err)
	}
}
