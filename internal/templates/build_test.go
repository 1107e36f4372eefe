package templates

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/template"
)

// refusingSandboxes stands for a manager that refuses every create (the
// account at its concurrency limit): a build's logic up to its first
// sandbox is tested here; its sandboxes, in test/e2e.
type refusingSandboxes struct {
	*exporter
	creates []service.CreateRequest
}

func (r *refusingSandboxes) Create(_ context.Context, account, keyID string, req service.CreateRequest) (*sandbox.Record, error) {
	r.mu.Lock()
	r.creates = append(r.creates, req)
	r.mu.Unlock()
	return nil, sandbox.Errorf(sandbox.KindConcurrency, "at the limit")
}

func (r *refusingSandboxes) Stop(context.Context, string, string) (*sandbox.Record, error) {
	return nil, sandbox.Errorf(sandbox.KindNotFound, "none")
}

func (r *refusingSandboxes) Agent(context.Context, string, string) (http.RoundTripper, error) {
	return nil, sandbox.Errorf(sandbox.KindNotFound, "none")
}

func buildRig(t *testing.T) (*rig, *refusingSandboxes) {
	r := newRig(t, store.TemplateQuota{})
	rs := &refusingSandboxes{exporter: r.ex}
	r.lib.cfg.Sandboxes = rs
	r.lib.cfg.BuildDir = t.TempDir()
	return r, rs
}

func spec(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func waitBuild(t *testing.T, l *Library, account, id string) *template.Build {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := l.GetBuild(t.Context(), account, id)
		if err != nil {
			t.Fatal(err)
		}
		if b.EndedAt != nil {
			return b
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("build %s did not end", id)
	return nil
}

// TestBuildRefusedUpFront: what can be known before anything runs is
// refused at once, with the stable code, and starts no sandbox.
func TestBuildRefusedUpFront(t *testing.T) {
	r, rs := buildRig(t)
	ctx := t.Context()
	var tall []any
	for range template.MaxLayers + 1 {
		tall = append(tall, map[string]any{"run": "true"})
	}
	for _, c := range []struct {
		spec any
		kind sandbox.Kind
		msg  string
	}{
		{map[string]any{"name": "team/tall", "steps": tall}, sandbox.KindInvalid, "33 layers"},
		{map[string]any{"name": "withruntime-build/abc", "steps": []any{map[string]any{"run": "true"}}}, sandbox.KindInvalid, "server's own"},
		{map[string]any{"name": "team/x", "from": map[string]any{"template": "missing"}, "steps": []any{map[string]any{"run": "true"}}}, sandbox.KindNotFound, "missing"},
		{map[string]any{"name": "team/x", "dockerfile": "FROM default\nEXPOSE 80\n"}, sandbox.KindInvalid, "line 2"},
		{map[string]any{"name": "team/x", "dockerfile": "FROM template://missing\nRUN true\n"}, sandbox.KindNotFound, "missing"},
		{map[string]any{"name": "team/x", "steps": []any{map[string]any{"run": "true", "bogus": 1}}}, sandbox.KindInvalid, "bogus"},
	} {
		_, err := r.lib.Build(ctx, "acct", "", spec(t, c.spec), nil, template.BuildSize{})
		if sandbox.KindOf(err) != c.kind || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: got %v, want %s naming %q", c.spec, err, c.kind, c.msg)
		}
	}
	// Env, workdir and user steps add no layer: 32 run steps and more of
	// those fit.
	fit := append([]any{map[string]any{"env": map[string]string{"A": "1"}}, map[string]any{"workdir": "/w"}}, tall[1:]...)
	b, err := r.lib.Build(ctx, "acct", "", spec(t, map[string]any{"name": "team/fit", "steps": fit}), nil, template.BuildSize{})
	if err != nil {
		t.Fatalf("a build of 32 layers and 2 steps that make none: %v", err)
	}
	waitBuild(t, r.lib, "acct", b.ID)
	if len(rs.creates) != 1 {
		t.Errorf("the refused builds asked for sandboxes: %d creates", len(rs.creates))
	}
}

// TestBuildFailsWithItsSandbox: a build whose sandbox the manager refuses
// fails with that refusal, names the step, makes no template, and is its
// account's only; its create asked for no internet and marked the
// sandbox as the build's.
func TestBuildFailsWithItsSandbox(t *testing.T) {
	r, rs := buildRig(t)
	ctx := t.Context()
	b, err := r.lib.Build(ctx, "acct", "key1", spec(t, map[string]any{"name": "team/app", "steps": []any{
		map[string]any{"env": map[string]string{"A": "1"}},
		map[string]any{"run": "echo hi"},
	}}), nil, template.BuildSize{VCPUs: 1, MemoryMiB: 256})
	if err != nil {
		t.Fatal(err)
	}
	if b.State != template.BuildQueued || !strings.HasPrefix(b.ID, "bld_") || len(b.ID) != 20 || b.Steps != 2 {
		t.Fatalf("started: %+v", b)
	}
	got := waitBuild(t, r.lib, "acct", b.ID)
	if got.State != template.BuildFailed || got.Step != 2 || sandbox.KindOf(got.Err) != sandbox.KindConcurrency || !strings.Contains(got.Err.Error(), "step 2") {
		t.Errorf("ended: %+v (%v)", got, got.Err)
	}
	if _, err := r.lib.Get(ctx, "acct", "team/app"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a failed build made a template: %v", err)
	}
	if len(rs.creates) != 1 || rs.creates[0].Network.Internet || rs.creates[0].Isolation != sandbox.IsolationGVisor || rs.creates[0].VCPUs != 1 || rs.creates[0].MemoryMiB != 256 || rs.creates[0].Metadata[BuildMeta] != b.ID || !strings.HasPrefix(rs.creates[0].Image, buildNamespace+"/") {
		t.Errorf("the creates asked: %+v", rs.creates)
	}
	if _, err := r.lib.GetBuild(ctx, "other", b.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another account's GetBuild: %v", err)
	}
	if err := r.lib.BuildLogs(ctx, "other", b.ID, false, func(template.BuildEvent) error { return nil }); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another account's BuildLogs: %v", err)
	}
	var types []string
	r.lib.BuildLogs(ctx, "acct", b.ID, true, func(e template.BuildEvent) error {
		types = append(types, e.Type)
		return nil
	})
	if len(types) == 0 || types[len(types)-1] != template.LogEnd {
		t.Errorf("the log: %v", types)
	}
	// The context directory is gone with the build.
	if ents, _ := os.ReadDir(filepath.Join(r.lib.cfg.BuildDir, "contexts")); len(ents) != 0 {
		t.Errorf("contexts left: %v", ents)
	}
}

// TestBuildRefsAreTheAccounts: a build sandbox's ref resolves for its own
// account only, and only while its create runs; no template is made or
// found under the namespace.
func TestBuildRefsAreTheAccounts(t *testing.T) {
	r, _ := buildRig(t)
	r.lib.buildsInit()
	ref := template.Ref{Name: buildNamespace + "/0123456789abcdef-1", Tag: template.DefaultTag}
	r.lib.b.roots["acct\x00"+ref.String()] = &template.Template{ID: "bld_x", Base: template.DefaultBase, Layers: []string{}}
	if got, err := r.lib.Resolve(t.Context(), "acct", ref); err != nil || got.ID != "bld_x" {
		t.Errorf("own account: %v %v", got, err)
	}
	if _, err := r.lib.Resolve(t.Context(), "other", ref); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another account: %v", err)
	}
	r.ex.trees["sbx"] = upper(t, map[string]string{"a": "a"})
	if _, err := r.lib.Snapshot(t.Context(), "acct", "sbx", buildNamespace+"/0123456789abcdef-1"); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("a snapshot into the namespace: %v", err)
	}
}

// TestBuildCache: entries persist across a restart (a new library on the
// same directory), the cache keeps its layers through Collect, and an
// entry past its age goes, its layer with it at the next Collect.
func TestBuildCache(t *testing.T) {
	r, _ := buildRig(t)
	ctx := t.Context()
	r.ex.trees["sbx"] = upper(t, map[string]string{"workspace/c.txt": "cached"})
	info, err := r.lib.stepLayer(ctx, "acct", "sbx", "bld_1", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.lib.cachePut("acct", "sha256:k1", cacheEntry{Base: template.DefaultBase, Layers: []string{info.Digest}, SizeBytes: info.SizeBytes})
	r.lib.setActive("bld_1", nil)
	r.now = r.now.Add(time.Minute)
	if err := r.lib.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if r.stored(t) != 1 {
		t.Fatalf("Collect freed the cache's layer")
	}
	// A new library on the same directory (a restart) finds the entry,
	// for its account only.
	l2 := New(Config{Store: r.st, Layers: r.layers, Sandboxes: r.lib.cfg.Sandboxes, BuildDir: r.lib.cfg.BuildDir, Now: func() time.Time { return r.now }})
	if e, ok := l2.cacheTake("acct", "sha256:k1", "bld_2"); !ok || len(e.Layers) != 1 || e.Layers[0] != info.Digest {
		t.Fatalf("after a restart: %+v %v", e, ok)
	}
	if _, ok := l2.cacheTake("other", "sha256:k1", "bld_3"); ok {
		t.Errorf("another account took the entry")
	}
	l2.setActive("bld_2", nil)
	r.now = r.now.Add(MaxCacheAge + time.Hour)
	if err := l2.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if r.stored(t) != 0 {
		t.Errorf("an entry past its age kept its layer")
	}
	if _, ok := l2.cacheTake("acct", "sha256:k1", "bld_4"); ok {
		t.Errorf("an entry past its age was taken")
	}

	// The count bound keeps the entries used last.
	c := &buildCache{entries: map[string]map[string]*cacheEntry{"a": {}}}
	for i := range MaxCacheEntries + 5 {
		c.entries["a"][fmt.Sprint(i)] = &cacheEntry{Used: r.now.Add(time.Duration(i) * time.Second)}
	}
	c.prune(r.now.Add(time.Hour), 0)
	if len(c.entries["a"]) != MaxCacheEntries || c.entries["a"]["0"] != nil || c.entries["a"][fmt.Sprint(MaxCacheEntries+4)] == nil {
		t.Errorf("pruned to %d entries", len(c.entries["a"]))
	}
	// The bytes bound keeps the entries used last that fit.
	for k, e := range c.entries["a"] {
		e.LayerBytes = 10
		c.entries["a"][k] = e
	}
	c.prune(r.now.Add(time.Hour), 35)
	if len(c.entries["a"]) != 3 || c.entries["a"][fmt.Sprint(MaxCacheEntries+4)] == nil {
		t.Errorf("pruned to %d entries by bytes", len(c.entries["a"]))
	}
}

// TestUnpackContext: a hostile build context is refused, with nothing
// written outside its directory.
func TestUnpackContext(t *testing.T) {
	type entry struct {
		name, body, link string
		typ              byte
	}
	mk := func(es ...entry) *bytes.Reader {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, e := range es {
			h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link}
			if e.typ != tar.TypeReg {
				h.Size = 0
			}
			tw.WriteHeader(h)
			tw.Write([]byte(e.body))
		}
		tw.Close()
		return bytes.NewReader(buf.Bytes())
	}
	for name, archive := range map[string]*bytes.Reader{
		"dot-dot":        mk(entry{name: "../escape", body: "x", typ: tar.TypeReg}),
		"absolute":       mk(entry{name: "/escape", body: "x", typ: tar.TypeReg}),
		"through a link": mk(entry{name: "l", link: "..", typ: tar.TypeSymlink}, entry{name: "l/escape", body: "x", typ: tar.TypeReg}),
		"a device":       mk(entry{name: "dev", typ: tar.TypeChar}),
		"hardlink out":   mk(entry{name: "h", link: "../../etc/passwd", typ: tar.TypeLink}),
		"not a tar":      bytes.NewReader(bytes.Repeat([]byte("x"), 1024)),
	} {
		parent := t.TempDir()
		dir := filepath.Join(parent, "ctx")
		os.Mkdir(dir, 0o700)
		err := unpackContext(dir, archive)
		if k := sandbox.KindOf(err); k != sandbox.KindInvalid {
			t.Errorf("%s: got %v, want invalid_request", name, err)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 1 {
			t.Errorf("%s: wrote beside the context: %v", name, ents)
		}
	}
	dir := t.TempDir()
	if err := unpackContext(dir, mk(entry{name: "withruntime-build.json", body: "{}", typ: tar.TypeReg}, entry{name: "app/", typ: tar.TypeDir}, entry{name: "app/a.txt", body: "a", typ: tar.TypeReg})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "withruntime-build.json")); !os.IsNotExist(err) {
		t.Errorf("the spec's entry was unpacked into the context: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "app/a.txt")); err != nil || string(b) != "a" {
		t.Errorf("app/a.txt: %q %v", b, err)
	}
}

// TestBuildsPerAccount: an account has at most MaxBuildsPerAccount builds
// queued or running; another account is not held by them.
func TestBuildsPerAccount(t *testing.T) {
	r, _ := buildRig(t)
	r.lib.cfg.MaxBuilds = 1
	ctx := t.Context()
	// The one build slot is held: every build stays queued.
	r.lib.buildsInit()
	r.lib.b.sem <- struct{}{}
	var ids []string
	for i := range MaxBuildsPerAccount {
		b, err := r.lib.Build(ctx, "acct", "", spec(t, map[string]any{"name": fmt.Sprintf("app%d", i), "steps": []any{map[string]any{"run": "true"}}}), nil, template.BuildSize{})
		if err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		ids = append(ids, b.ID)
	}
	if _, err := r.lib.Build(ctx, "acct", "", spec(t, map[string]any{"name": "one-more", "steps": []any{map[string]any{"run": "true"}}}), nil, template.BuildSize{}); sandbox.KindOf(err) != sandbox.KindConcurrency {
		t.Errorf("a build past the account's bound: %v", err)
	}
	other, err := r.lib.Build(ctx, "other", "", spec(t, map[string]any{"name": "app", "steps": []any{map[string]any{"run": "true"}}}), nil, template.BuildSize{})
	if err != nil {
		t.Errorf("another account's build: %v", err)
	}
	<-r.lib.b.sem
	for _, id := range ids {
		waitBuild(t, r.lib, "acct", id)
	}
	waitBuild(t, r.lib, "other", other.ID)
	after, err := r.lib.Build(ctx, "acct", "", spec(t, map[string]any{"name": "after", "steps": []any{map[string]any{"run": "true"}}}), nil, template.BuildSize{})
	if err != nil {
		t.Fatalf("a build once the others ended: %v", err)
	}
	waitBuild(t, r.lib, "acct", after.ID)
}
