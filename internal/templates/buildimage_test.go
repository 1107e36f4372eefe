package templates

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/template"
)

// testImage is a linux/amd64 image of one layer of files, its config's
// env env.
func testImage(t *testing.T, files map[string]string, env ...string) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(upper(t, files), types.OCIUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = env
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// savedImage is img as docker save writes it.
func savedImage(t *testing.T, img v1.Image) []byte {
	t.Helper()
	tag, _ := name.NewTag("example/app:v1")
	var buf bytes.Buffer
	if err := tarball.Write(tag, img, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// contextTar is a build context of files (and symlinks: a body starting
// with "->").
func contextTar(t *testing.T, files map[string]string) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, body := range files {
		h := &tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(body))}
		if target, ok := strings.CutPrefix(body, "->"); ok {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, target, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(body))
		}
	}
	tw.Close()
	return &buf
}

// logOf is build id's log as text.
func logOf(t *testing.T, l *Library, account, id string) string {
	var sb strings.Builder
	l.BuildLogs(t.Context(), account, id, false, func(e template.BuildEvent) error {
		sb.WriteString(e.Message + "\n")
		return nil
	})
	return sb.String()
}

// collectingSandboxes refuses every create, as refusingSandboxes does,
// but first resolves the build sandbox's root and runs Collect: what the
// build stands on must survive it.
type collectingSandboxes struct {
	*refusingSandboxes
	lib   *Library
	roots [][]string
}

func (c *collectingSandboxes) Create(ctx context.Context, account, keyID string, req service.CreateRequest) (*sandbox.Record, error) {
	ref, _ := template.ParseRef(req.Image)
	if t, err := c.lib.Resolve(ctx, account, ref); err == nil {
		c.roots = append(c.roots, t.Layers)
	}
	if err := c.lib.Collect(ctx); err != nil {
		return nil, err
	}
	return c.refusingSandboxes.Create(ctx, account, keyID, req)
}

// TestBuildFromArchive: a build FROM an image archive in its context reads
// it when it runs, with the image's layers, the platform layer and its
// defaults as the base (its bytes counted in the template); the same image
// again is not read again and keys the same cache; a link out of the
// context, a missing archive and an image past the quota fail the build,
// naming why; the first step's sandbox stands on the image's layers,
// which Collect keeps while the build runs.
func TestBuildFromArchive(t *testing.T) {
	r, rs := buildRig(t)
	ctx := t.Context()
	img := testImage(t, map[string]string{"srv/from-image.txt": "image"}, "FROM_IMAGE=yes", "PATH=/bin")
	saved := savedImage(t, img)
	envOnly := map[string]any{"name": "team/fromimg", "dockerfile": "FROM archive://img/app.tar\nENV B=$FROM_IMAGE-b\n"}

	b, err := r.lib.Build(ctx, "acct", "", spec(t, envOnly), contextTar(t, map[string]string{"img/app.tar": string(saved)}), template.BuildSize{})
	if err != nil {
		t.Fatal(err)
	}
	got := waitBuild(t, r.lib, "acct", b.ID)
	log1 := logOf(t, r.lib, "acct", b.ID)
	if got.State != template.BuildSucceeded || got.Result == nil {
		t.Fatalf("the build ended %+v (%v)\n%s", got, got.Err, log1)
	}
	res := got.Result
	diffs, _ := img.ConfigFile()
	if res.Base != "" || len(res.Layers) != 2 || res.Layers[0] != diffs.RootFS.DiffIDs[0].String() || res.SizeBytes <= 0 ||
		res.Defaults.Env["FROM_IMAGE"] != "yes" || res.Defaults.Env["B"] != "yes-b" {
		t.Errorf("the template: %+v", res)
	}
	for _, want := range []string{"reading the image archive img/app.tar", "layer 1: reading", "imported archive://img/app.tar: 2 layers"} {
		if !strings.Contains(log1, want) {
			t.Errorf("the log lacks %q:\n%s", want, log1)
		}
	}
	stored := r.stored(t)

	// The same image again: taken from the cache, not read.
	b2, err := r.lib.Build(ctx, "acct", "", spec(t, map[string]any{"name": "team/fromimg2", "dockerfile": envOnly["dockerfile"]}),
		contextTar(t, map[string]string{"img/app.tar": string(saved)}), template.BuildSize{})
	if err != nil {
		t.Fatal(err)
	}
	got2 := waitBuild(t, r.lib, "acct", b2.ID)
	log2 := logOf(t, r.lib, "acct", b2.ID)
	if got2.State != template.BuildSucceeded || !slices.Equal(got2.Result.Layers, res.Layers) || got2.Result.SizeBytes != res.SizeBytes ||
		!strings.Contains(log2, "stored already") || strings.Contains(log2, "layer 1: reading") {
		t.Errorf("the second build: %+v (%v)\n%s", got2, got2.Err, log2)
	}
	if r.stored(t) != stored {
		t.Errorf("the second build stored %d layers, were %d", r.stored(t), stored)
	}

	// A step that makes a layer: its sandbox stands on the image, and
	// Collect while it is created keeps every layer.
	cs := &collectingSandboxes{refusingSandboxes: rs, lib: r.lib}
	r.lib.cfg.Sandboxes = cs
	r.now = r.now.Add(time.Hour)
	other := testImage(t, map[string]string{"srv/other.txt": "other"})
	b3, err := r.lib.Build(ctx, "acct", "", spec(t, map[string]any{"name": "team/run", "from": map[string]any{"archive": "o.tar"}, "steps": []any{map[string]any{"run": "true"}}}),
		contextTar(t, map[string]string{"o.tar": string(savedImage(t, other))}), template.BuildSize{})
	if err != nil {
		t.Fatal(err)
	}
	got3 := waitBuild(t, r.lib, "acct", b3.ID)
	if got3.State != template.BuildFailed || got3.Step != 1 || sandbox.KindOf(got3.Err) != sandbox.KindConcurrency {
		t.Errorf("the build with a step: %+v (%v)", got3, got3.Err)
	}
	od, _ := other.ConfigFile()
	if len(cs.roots) != 1 || len(cs.roots[0]) != 2 || cs.roots[0][0] != od.RootFS.DiffIDs[0].String() {
		t.Fatalf("the step's sandbox stood on %v", cs.roots)
	}
	for _, d := range cs.roots[0] {
		if !r.lib.layersThere([]string{d}) {
			t.Errorf("Collect during the build removed %s", d)
		}
	}
	r.lib.cfg.Sandboxes = rs

	// Failures: the build fails, naming why, and makes no template.
	for _, c := range []struct {
		name  string
		files map[string]string
		quota int64
		kind  sandbox.Kind
		msg   string
	}{
		{"missing", map[string]string{"x": "x"}, 0, sandbox.KindInvalid, "not in the build context"},
		{"a link out", map[string]string{"img/app.tar": "->/etc/passwd"}, 0, sandbox.KindInvalid, "not in the build context"},
		{"a link up", map[string]string{"img/app.tar": "->../../../../../../etc/passwd"}, 0, sandbox.KindInvalid, "not in the build context"},
		{"not an image", map[string]string{"img/app.tar": strings.Repeat("x", 4096)}, 0, sandbox.KindInvalid, "not an image"},
		{"over the quota", map[string]string{"img/app.tar": string(savedImage(t, testImage(t, map[string]string{"big": strings.Repeat("b", 64<<10)})))}, 16 << 10, store.ErrTemplateQuota.Kind, "quota"},
	} {
		r.lib.cfg.Quota = store.TemplateQuota{MaxBytes: c.quota}
		b, err := r.lib.Build(ctx, "acct", "", spec(t, map[string]any{"name": "team/bad", "dockerfile": "FROM archive://img/app.tar\nENV A=1\n"}), contextTar(t, c.files), template.BuildSize{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := waitBuild(t, r.lib, "acct", b.ID)
		if got.State != template.BuildFailed || sandbox.KindOf(got.Err) != c.kind || !strings.Contains(sandbox.MessageOf(got.Err), c.msg) {
			t.Errorf("%s: %+v (%v), want %s naming %q", c.name, got, got.Err, c.kind, c.msg)
		}
	}
	r.lib.cfg.Quota = store.TemplateQuota{}
	if _, err := r.lib.Get(ctx, "acct", "team/bad"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a failed build made a template: %v", err)
	}
}

// TestBuildFromRegistry: a build FROM a registry reference pins the tag
// and imports the image; a rebuild of the same digest reads no layer; a
// moved tag is a new base (a cache miss); a registry on this host is
// refused unless Config.PrivateRegistries, failing the build, not the
// request.
func TestBuildFromRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref, _ := name.ParseReference(host + "/team/app:v1")
	img := testImage(t, map[string]string{"srv/a.txt": "a"})
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	r, _ := buildRig(t)
	ctx := t.Context()
	build := func(name string) (*template.Build, string) {
		t.Helper()
		b, err := r.lib.Build(ctx, "acct", "", spec(t, map[string]any{"name": name, "from": map[string]any{"image": host + "/team/app:v1"}, "steps": []any{map[string]any{"env": map[string]string{"A": "1"}}}}), nil, template.BuildSize{})
		if err != nil {
			t.Fatal(err)
		}
		return waitBuild(t, r.lib, "acct", b.ID), logOf(t, r.lib, "acct", b.ID)
	}

	got, lg := build("team/refused")
	if got.State != template.BuildFailed || sandbox.KindOf(got.Err) != sandbox.KindInvalid || !strings.Contains(sandbox.MessageOf(got.Err), "not a public address") {
		t.Errorf("a loopback registry without PrivateRegistries: %+v (%v)\n%s", got, got.Err, lg)
	}

	r.lib.cfg.PrivateRegistries = true
	got, lg = build("team/a")
	dg, _ := img.Digest()
	if got.State != template.BuildSucceeded || len(got.Result.Layers) != 2 || !strings.Contains(lg, "pulling "+host+"/team/app:v1") || !strings.Contains(lg, dg.String()) {
		t.Fatalf("the build: %+v (%v)\n%s", got, got.Err, lg)
	}
	first := got.Result.Layers
	got, lg = build("team/b")
	if got.State != template.BuildSucceeded || !slices.Equal(got.Result.Layers, first) || !strings.Contains(lg, "stored already") {
		t.Errorf("the rebuild: %+v\n%s", got, lg)
	}
	if err := remote.Write(ref, testImage(t, map[string]string{"srv/a.txt": "moved"})); err != nil {
		t.Fatal(err)
	}
	got, lg = build("team/c")
	if got.State != template.BuildSucceeded || got.Result.Layers[0] == first[0] || strings.Contains(lg, "stored already") {
		t.Errorf("after the tag moved: %+v\n%s", got, lg)
	}
}
