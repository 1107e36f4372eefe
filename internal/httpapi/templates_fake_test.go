package httpapi

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// fakeTemplates is a template library in memory for the route table's
// tests: every account sees one template of any name it asks for, and
// makes one by snapshot or import. What the library does is tested in
// internal/templates and test/e2e; here only the routes' keys, bodies and
// views are.
type fakeTemplates struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeTemplates) call(op, account string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op+" "+account)
}

func (f *fakeTemplates) made(account, name string) (*template.Template, error) {
	ref, err := template.ParseRef(name)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "%v", err)
	}
	return &template.Template{ID: "tpl_0123456789abcdef", Account: account, Name: ref.Name, Tag: ref.Tag, Source: template.SourceSnapshot, Base: template.DefaultBase, CreatedAt: time.Now()}, nil
}

func (f *fakeTemplates) List(_ context.Context, account string) ([]*template.Template, error) {
	f.call("list", account)
	t, _ := f.made(account, "app")
	return []*template.Template{t}, nil
}

func (f *fakeTemplates) Get(_ context.Context, account, name string) (*template.Template, error) {
	f.call("get", account)
	return f.made(account, "app")
}

func (f *fakeTemplates) Delete(_ context.Context, account, name string) (*template.Template, error) {
	f.call("delete", account)
	t, err := f.made(account, "app")
	now := time.Now()
	t.DeletedAt = &now
	return t, err
}

func (f *fakeTemplates) Snapshot(_ context.Context, account, id, name string) (*template.Template, error) {
	f.call("snapshot", account)
	return f.made(account, name)
}

func (f *fakeTemplates) Import(_ context.Context, account, name string, archive io.Reader) (*template.Template, error) {
	f.call("import", account)
	io.Copy(io.Discard, archive)
	return f.made(account, name)
}

func (f *fakeTemplates) ImportRef(_ context.Context, account, name, ref string) (*template.Template, error) {
	f.call("import_ref", account)
	return f.made(account, name)
}

func (f *fakeTemplates) Publish(_ context.Context, account, name string, public bool) (*template.Template, error) {
	f.call("publish", account)
	t, err := f.made(account, "app")
	if t != nil {
		t.Public = public
	}
	return t, err
}
