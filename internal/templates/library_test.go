package templates

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/layer"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
	"github.com/withruntime/withruntime/internal/template"
)

// exporter stands for the manager: each sandbox's root changes are the
// tar it is given, written as runsc's export would (overlay form), or an
// error.
type exporter struct {
	mu    sync.Mutex
	trees map[string][]byte
	roots map[string]*sandbox.Root
	fail  error
	// pooled are the templates of warm pool members.
	pooled []string
}

func (e *exporter) ExportRoot(_ context.Context, account, id string, w io.Writer) (*sandbox.Record, error) {
	e.mu.Lock()
	tree, ok := e.trees[id]
	root, fail := e.roots[id], e.fail
	e.mu.Unlock()
	if !ok || account != "acct" {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no sandbox %s", id)
	}
	if fail != nil {
		w.Write(tree[:512])
		return nil, fail
	}
	if _, err := w.Write(tree); err != nil {
		return nil, err
	}
	return &sandbox.Record{ID: id, Account: account, State: sandbox.StateRunning, Spec: sandbox.Spec{Root: root}}, nil
}

func (e *exporter) PoolTemplates() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pooled
}

// upper is an overlay-form tar of files (name -> content); a name with
// content "\x00dev" is a character device 1:3.
func upper(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		h := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(body)), ModTime: time.Unix(1e9, 0)}
		if body == "\x00dev" {
			h.Typeflag, h.Size, h.Devmajor, h.Devminor = tar.TypeChar, 0, 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

type rig struct {
	lib    *Library
	st     *store.Bolt
	layers *layer.Store
	ex     *exporter
	now    time.Time
}

func newRig(t *testing.T, q store.TemplateQuota) *rig {
	t.Helper()
	layers, err := layer.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{st: storetest.OpenBolt(t), layers: layers, ex: &exporter{trees: map[string][]byte{}, roots: map[string]*sandbox.Root{}}, now: time.Unix(2e9, 0)}
	r.lib = New(Config{Store: r.st, Layers: layers, Sandboxes: r.ex, Quota: q, Limits: layer.Limits{MaxBytes: 1 << 20, MaxEntries: 100}, TempDir: t.TempDir(),
		Now: func() time.Time { return r.now }})
	return r
}

func (r *rig) stored(t *testing.T) int {
	t.Helper()
	infos, err := r.layers.List()
	if err != nil {
		t.Fatal(err)
	}
	return len(infos)
}

// TestSnapshotAndCollect: a snapshot stacks the sandbox's changes on its
// template; a refused or failed export leaves nothing; a removed template
// keeps its layers while a sandbox uses it (and for the grace after its
// removal), and loses them after; a layer two templates share stays while
// either does.
func TestSnapshotAndCollect(t *testing.T) {
	r := newRig(t, store.TemplateQuota{})
	ctx := t.Context()
	r.ex.trees["sbxa"] = upper(t, map[string]string{"workspace/a.txt": "a"})
	a, err := r.lib.Snapshot(ctx, "acct", "sbxa", "team/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if a.Base != template.DefaultBase || len(a.Layers) != 1 || a.Source != template.SourceSnapshot || a.SizeBytes != 1 {
		t.Fatalf("snapshot of a default sandbox: %+v", a)
	}
	// A sandbox of a: its snapshot keeps a's layer under its own.
	r.ex.trees["sbxb"] = upper(t, map[string]string{"workspace/b.txt": "bb"})
	r.ex.roots["sbxb"] = &sandbox.Root{Template: a.ID, Base: a.Base, Layers: a.Layers}
	b, err := r.lib.Snapshot(ctx, "acct", "sbxb", "team/app:v2")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Layers) != 2 || b.Layers[0] != a.Layers[0] {
		t.Fatalf("snapshot of a template's sandbox: %+v", b)
	}

	// Refusals leave no layer and no record.
	before := r.stored(t)
	r.ex.trees["sbxdev"] = upper(t, map[string]string{"dev/x": "\x00dev"})
	if _, err := r.lib.Snapshot(ctx, "acct", "sbxdev", "dev"); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("a device in the changes: got %v, want invalid_request", err)
	}
	r.ex.trees["sbxbig"] = upper(t, map[string]string{"big": string(make([]byte, 2<<20))})
	if _, err := r.lib.Snapshot(ctx, "acct", "sbxbig", "big"); sandbox.KindOf(err) != sandbox.KindPayloadTooLarge {
		t.Errorf("changes past the bound: got %v, want payload_too_large", err)
	}
	r.ex.fail = errors.New("runsc died")
	r.ex.trees["sbxfail"] = upper(t, map[string]string{"x": "y"})
	if _, err := r.lib.Snapshot(ctx, "acct", "sbxfail", "fail"); err == nil || !errors.Is(err, r.ex.fail) {
		t.Errorf("a failed export: got %v, want its error", err)
	}
	r.ex.fail = nil
	if _, err := r.lib.Snapshot(ctx, "other", "sbxa", "x"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another account's sandbox: got %v", err)
	}
	if _, err := r.lib.Snapshot(ctx, "acct", "sbxa", "Bad Name"); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("a bad name: got %v", err)
	}
	if n := r.stored(t); n != before {
		t.Errorf("refused snapshots left layers: %d, were %d", n, before)
	}
	for _, name := range []string{"dev", "big", "fail"} {
		if _, err := r.lib.Get(ctx, "acct", name); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("template %s: got %v, want not_found", name, err)
		}
	}

	// a removed while a sandbox of b runs: b names a's layer too, so it
	// stays; b's own layer stays while its sandbox lives.
	if _, err := r.lib.Delete(ctx, "acct", "team/app:v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.lib.Resolve(ctx, "acct", template.Ref{Name: "team/app", Tag: "v1"}); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a removed template resolved: %v", err)
	}
	live := &sandbox.Record{ID: "sbxuser", Account: "acct", State: sandbox.StateRunning, Spec: sandbox.Spec{Root: &sandbox.Root{Template: b.ID, Layers: b.Layers}}}
	if err := r.st.PutSandbox(ctx, live); err != nil {
		t.Fatal(err)
	}
	if _, err := r.lib.Delete(ctx, "acct", "team/app:v2"); err != nil {
		t.Fatal(err)
	}
	r.now = r.now.Add(time.Hour)
	if err := r.lib.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.stored(t); n != 2 {
		t.Errorf("layers in use: %d stored, want 2", n)
	}
	if _, err := r.st.GetTemplate(ctx, b.ID); err != nil {
		t.Errorf("a removed template in use was purged: %v", err)
	}
	// Its sandbox ends, but a warm pool member of it still waits: the
	// layers stay; once the member is gone they go.
	live.State = sandbox.StateEnded
	if err := r.st.PutSandbox(ctx, live); err != nil {
		t.Fatal(err)
	}
	r.ex.mu.Lock()
	r.ex.pooled = []string{b.ID}
	r.ex.mu.Unlock()
	if err := r.lib.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.stored(t); n != 2 {
		t.Errorf("layers of a pool member's template: %d stored, want 2", n)
	}
	r.ex.mu.Lock()
	r.ex.pooled = nil
	r.ex.mu.Unlock()
	if err := r.lib.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.stored(t); n != 0 {
		t.Errorf("layers of removed, unused templates: %d stored, want 0", n)
	}
	if _, err := r.st.GetTemplate(ctx, b.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("the removed template's record: %v", err)
	}
}

// TestRemovedJustNow: a template removed a moment ago keeps its layers
// for the grace (a create may have resolved it and not yet recorded its
// sandbox).
func TestRemovedJustNow(t *testing.T) {
	r := newRig(t, store.TemplateQuota{})
	ctx := t.Context()
	r.ex.trees["sbxa"] = upper(t, map[string]string{"a": "a"})
	if _, err := r.lib.Snapshot(ctx, "acct", "sbxa", "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.lib.Delete(ctx, "acct", "app"); err != nil {
		t.Fatal(err)
	}
	r.now = r.now.Add(DefaultGrace / 2)
	r.lib.Collect(ctx)
	if n := r.stored(t); n != 1 {
		t.Errorf("within the grace: %d layers stored, want 1", n)
	}
	r.now = r.now.Add(DefaultGrace)
	r.lib.Collect(ctx)
	if n := r.stored(t); n != 0 {
		t.Errorf("after the grace: %d layers stored, want 0", n)
	}
}

// TestDeleteOthers: a public template is another account's to remove; the
// quota counts live templates, a replaced name not twice.
func TestDeleteOthersAndQuota(t *testing.T) {
	r := newRig(t, store.TemplateQuota{MaxCount: 1})
	ctx := t.Context()
	r.ex.trees["sbxa"] = upper(t, map[string]string{"a": "a"})
	a, err := r.lib.Snapshot(ctx, "acct", "sbxa", "shared")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.lib.Snapshot(ctx, "acct", "sbxa", "second"); sandbox.KindOf(err) != sandbox.KindForbidden {
		t.Errorf("past the quota: got %v, want forbidden", err)
	}
	if _, err := r.lib.Snapshot(ctx, "acct", "sbxa", "shared"); err != nil {
		t.Errorf("replacing at the quota: %v", err)
	}
	if err := r.st.SetTemplatePublic(ctx, mustGet(t, r, "acct", "shared").ID, true); err != nil {
		t.Fatal(err)
	}
	if got, err := r.lib.Get(ctx, "other", "shared"); err != nil || got.Account != "acct" {
		t.Fatalf("another account's view of a public template: %+v, %v", got, err)
	}
	if _, err := r.lib.Delete(ctx, "other", "shared"); sandbox.KindOf(err) != sandbox.KindForbidden {
		t.Errorf("another account removing a public template: got %v, want forbidden", err)
	}
	_ = a
}

func mustGet(t *testing.T, r *rig, account, name string) *template.Template {
	t.Helper()
	got, err := r.lib.Get(t.Context(), account, name)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCollectStacks: what a backend made of a template's whole stack (a
// microVM's disk) goes with the template, and stays while it does.
func TestCollectStacks(t *testing.T) {
	r := newRig(t, store.TemplateQuota{})
	ctx := t.Context()
	r.ex.trees["sbxa"] = upper(t, map[string]string{"a": "a"})
	r.ex.trees["sbxb"] = upper(t, map[string]string{"b": "b"})
	a, err := r.lib.Snapshot(ctx, "acct", "sbxa", "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.lib.Snapshot(ctx, "acct", "sbxb", "b")
	if err != nil {
		t.Fatal(err)
	}
	dir := r.layers.StacksDir()
	os.MkdirAll(filepath.Join(dir, "make-1"), 0o700)
	for _, tp := range []*template.Template{a, b} {
		os.WriteFile(filepath.Join(dir, layer.StackKey(tp.Base, tp.Layers)+".ext4"), []byte("disk"), 0o444)
	}
	if _, err := r.lib.Delete(ctx, "acct", "a"); err != nil {
		t.Fatal(err)
	}
	r.now = r.now.Add(time.Hour)
	if err := r.lib.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	for tp, want := range map[*template.Template]bool{a: false, b: true} {
		_, err := os.Stat(filepath.Join(dir, layer.StackKey(tp.Base, tp.Layers)+".ext4"))
		if (err == nil) != want {
			t.Errorf("the disk of %s: present %v, want %v", tp.Name, err == nil, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "make-1")); err != nil {
		t.Errorf("a disk being made was removed: %v", err)
	}
}
