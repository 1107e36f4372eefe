package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// tarEntry is one entry of a layer a test writes.
type tarEntry struct {
	name, body, link string
	mode             int64
	kind             byte
}

// layerOf is an uncompressed layer of entries.
func layerOf(t *testing.T, entries ...tarEntry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: e.kind, Linkname: e.link, Size: int64(len(e.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageArchive writes an image of layers and cfg as docker save does.
func imageArchive(t *testing.T, cfg v1.Config, layers ...v1.Layer) string {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference("probe:latest")
	path := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(path, ref, img); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTemplateFromImage: an OCI image (docker save) becomes a template
// through the CLI; its layers' whiteouts apply, its config's env and
// working directory are the defaults, and an image with no shell, no libc
// and no Python gives a sandbox that runs its own binary as the sandbox's
// user. Archives that are no image, or that hold unsafe entries, are
// refused by name and leave nothing stored.
func TestTemplateFromImage(t *testing.T) {
	probe := filepath.Join(t.TempDir(), "imgprobe")
	build := exec.Command("go", "build", "-o", probe, "./testdata/imgprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(probe)
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.StartServer(t)
	env := s.Env()
	c := tpl{t, s, s.Key}

	archive := imageArchive(t, v1.Config{Env: []string{"FOO=from-image", "PATH=/bin"}, WorkingDir: "/data", Cmd: []string{"/bin/imgprobe", "start"}},
		layerOf(t,
			tarEntry{name: "bin/", kind: tar.TypeDir, mode: 0o755},
			tarEntry{name: "bin/imgprobe", body: string(bin), mode: 0o755},
			tarEntry{name: "data/", kind: tar.TypeDir, mode: 0o777},
			tarEntry{name: "data/a.txt", body: "one"},
			tarEntry{name: "data/gone.txt", body: "soon removed"},
			tarEntry{name: "old/", kind: tar.TypeDir, mode: 0o755},
			tarEntry{name: "old/x.txt", body: "hidden by an opaque dir"},
		),
		layerOf(t,
			tarEntry{name: "data/.wh.gone.txt"},
			tarEntry{name: "data/b.txt", body: "two"},
			tarEntry{name: "old/", kind: tar.TypeDir, mode: 0o755},
			tarEntry{name: "old/.wh..wh..opq"},
			tarEntry{name: "old/y.txt", body: "new"},
		))
	out, errs, code := cli(t, env, "template", "import", "-t", "probe:v1", archive)
	if code != 0 {
		t.Fatalf("template import: exit %d\n%s\n%s", code, out, errs)
	}
	st, data := c.do("GET", "/v1/templates/probe:v1", "")
	var got api.Template
	if st != 200 || json.Unmarshal(data, &got) != nil {
		t.Fatalf("get: %d %s", st, data)
	}
	if got.Source != "oci" || got.Base != "" || got.Layers != 3 || got.Defaults.Env["FOO"] != "from-image" || got.Defaults.Workdir != "/data" || got.Defaults.User != "root" || got.Defaults.StartCmd == "" {
		t.Errorf("the imported template: %+v", got)
	}

	st, sb, code2 := sbx{t, s, s.Key}.create(`{"template":"probe:v1","vcpus":1,"memory_mib":512}`)
	if st != http.StatusCreated {
		t.Fatalf("create from the image: %d %s\nserver log:\n%s", st, code2, s.Log)
	}
	t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+sb.ID, nil) })
	out, errs, code = cli(t, env, "sandbox", "exec", sb.ID, "--", "/bin/imgprobe", "/data/a.txt", "/data/b.txt", "/data/gone.txt", "/old/x.txt", "/old/y.txt")
	if code != 0 {
		t.Fatalf("exec of the image's binary: exit %d\n%s\n%s", code, out, errs)
	}
	// The image names no user: its commands run as root, as docker runs
	// them, in its working directory.
	for _, want := range []string{"cwd=/data uid=0", "FOO=from-image", "/data/a.txt: one", "/data/b.txt: two", "/data/gone.txt: -", "/old/x.txt: -", "/old/y.txt: new"} {
		if !strings.Contains(out, want) {
			t.Errorf("the probe printed %q, want it to contain %q", out, want)
		}
	}
	// The image's command runs from the start, with no shell to run it.
	for i := 0; ; i++ {
		out, _, _ = cli(t, env, "sandbox", "exec", sb.ID, "--", "/bin/imgprobe", "/data/started.txt")
		if strings.Contains(out, "/data/started.txt: yes") {
			break
		}
		if i == 50 {
			t.Fatalf("the image's command did not run: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The sandbox user is there for what asks for it.
	if out, errs, code := cli(t, env, "sandbox", "exec", sb.ID, "--user", "user", "--", "/bin/imgprobe"); code != 0 || !strings.Contains(out, "uid=1000") {
		t.Errorf("exec as the sandbox user: exit %d %q %s", code, out, errs)
	}
	stored := len(layerDirs(t, s.DataDir))

	t.Run("a registry on this host is refused without --allow-private-registries", func(t *testing.T) {
		reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		defer reg.Close()
		ref := strings.TrimPrefix(reg.URL, "http://") + "/probe:v1"
		out, errs, code := cli(t, env, "template", "import", "-t", "from-reg", ref)
		if code == 0 || !strings.Contains(errs, "invalid_request") {
			t.Errorf("import of %s: exit %d\n%s\n%s", ref, code, out, errs)
		}
	})

	t.Run("hostile archives", func(t *testing.T) {
		notImage := filepath.Join(t.TempDir(), "not-an-image.tar")
		os.WriteFile(notImage, []byte(strings.Repeat("x", 2048)), 0o644)
		for _, tc := range []struct{ name, path string }{
			{"not an image", notImage},
			{"a name out of the tree", imageArchive(t, v1.Config{}, layerOf(t, tarEntry{name: "../../escape", body: "x"}))},
			{"an absolute name", imageArchive(t, v1.Config{}, layerOf(t, tarEntry{name: "/etc/escape", body: "x"}))},
			{"a write through a link out", imageArchive(t, v1.Config{}, layerOf(t,
				tarEntry{name: "out", kind: tar.TypeSymlink, link: "/tmp"},
				tarEntry{name: "out/planted", body: "x"}))},
			{"a hard link out", imageArchive(t, v1.Config{}, layerOf(t, tarEntry{name: "h", kind: tar.TypeLink, link: "/etc/passwd"}))},
			{"a device", imageArchive(t, v1.Config{}, layerOf(t, tarEntry{name: "dev/mem", kind: tar.TypeChar}))},
		} {
			out, errs, code := cli(t, env, "template", "import", "-t", "bad", tc.path)
			if code == 0 || !strings.Contains(errs, "invalid_request") {
				t.Errorf("%s: exit %d\n%s\n%s", tc.name, code, out, errs)
			}
		}
		if _, err := os.Lstat("/tmp/planted"); err == nil {
			t.Errorf("an image wrote /tmp/planted on the host")
		}
		if n := len(layerDirs(t, s.DataDir)); n != stored {
			t.Errorf("refused images left layers: %d stored, were %d", n, stored)
		}
		if st, _ := c.do("GET", "/v1/templates/bad", ""); st != 404 {
			t.Errorf("a refused image made a template: %d", st)
		}
	})
}

// TestTemplateFromRegistry: `template import -t NAME REF` has the server
// read the image from its registry (here one the test serves on loopback,
// which the server reaches only with --allow-private-registries).
func TestTemplateFromRegistry(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	img, err := mutate.AppendLayers(empty.Image, layerOf(t, tarEntry{name: "srv/", kind: tar.TypeDir, mode: 0o755}, tarEntry{name: "srv/from-registry.txt", body: "pulled"}))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host+"/team/app:v2", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	s := testenv.StartServer(t, "--allow-private-registries")
	env := s.Env()
	out, errs, code := cli(t, env, "template", "import", "-t", "pulled", host+"/team/app:v2")
	if code != 0 {
		t.Fatalf("template import from the registry: exit %d\n%s\n%s", code, out, errs)
	}
	st, sb, code2 := sbx{t, s, s.Key}.create(`{"template":"pulled","vcpus":1,"memory_mib":512}`)
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, code2)
	}
	t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+sb.ID, nil) })
	// The image has no shell: its file is read through the files API.
	out, errs, code = cli(t, env, "sandbox", "cp", sb.ID+":/srv/from-registry.txt", "-")
	if code != 0 || !strings.Contains(out, "pulled") {
		t.Errorf("the pulled image's file: exit %d %q %s", code, out, errs)
	}
	if out, errs, code := cli(t, env, "template", "import", "-t", "nothing", host+"/team/absent:v1"); code == 0 {
		t.Errorf("an absent image was imported: %s %s", out, errs)
	}

	// Builds FROM an image: one with a shell (the host's dash and the
	// libc it needs), for the build's RUN step.
	shell := shellImage(t)
	// startFrom starts a sandbox of template name, removed with the test.
	startFrom := func(t *testing.T, name string) string {
		t.Helper()
		st, box, code := sbx{t, s, s.Key}.create(`{"template":"` + name + `","vcpus":1,"memory_mib":512}`)
		if st != http.StatusCreated {
			t.Fatalf("create from %s: %d %s", name, st, code)
		}
		t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+box.ID, nil) })
		return box.ID
	}
	// The image's shell has no cat: its read builtin reads the files.
	cat := func(id, file string) string {
		t.Helper()
		return tpl{t, s, s.Key}.sh(id, `while IFS= read -r l; do echo "$l"; done < `+file)
	}
	t.Run("build FROM a registry reference", func(t *testing.T) {
		shRef, _ := name.ParseReference(host+"/team/sh:v1", name.Insecure)
		if err := remote.Write(shRef, shell); err != nil {
			t.Fatal(err)
		}
		b := builder{t, s, s.Key}
		spec := func(n string) []byte {
			body, _ := json.Marshal(map[string]any{"name": n, "dockerfile": "FROM " + host + "/team/sh:v1\nRUN echo \"built on $FOO\" > /srv/built.txt\n"})
			return body
		}
		cold, evs, _ := b.run(spec("team/on-image"), "application/json")
		if cold.State != api.BuildSucceeded || cold.Result == nil || cold.Result.Layers != 4 || cold.Result.Base != "" || cold.Result.Defaults.Env["FOO"] != "from-image" {
			t.Fatalf("the build ended %+v %+v\n%s", cold, cold.Error, logText(evs))
		}
		for _, want := range []string{"pulling " + host + "/team/sh:v1", "layer 2: reading", "imported " + host + "/team/sh:v1: 3 layers"} {
			if !strings.Contains(logText(evs), want) {
				t.Errorf("the log lacks %q:\n%s", want, logText(evs))
			}
		}
		id := startFrom(t, "team/on-image")
		if got := cat(id, "/srv/built.txt") + cat(id, "/srv/from-image.txt"); got != "built on from-image\nshell image\n" {
			t.Errorf("a sandbox of the build reads %q", got)
		}
		// Again: the tag is checked, nothing is pulled nor run.
		warm, evs, _ := b.run(spec("team/on-image2"), "application/json")
		if warm.State != api.BuildSucceeded || warm.CachedSteps != 1 || b.sandboxesOf(warm.ID) != 0 || !strings.Contains(logText(evs), "stored already") {
			t.Errorf("the rebuild: %+v\n%s", warm, logText(evs))
		}
	})
	t.Run("build FROM an archive in the context", func(t *testing.T) {
		dir := t.TempDir()
		tag, _ := name.NewTag("example/sh:v1")
		if err := tarball.WriteToFile(filepath.Join(dir, "img.tar"), tag, shell); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM archive://img.tar\nRUN echo \"from the archive, $FOO\" > /srv/archive.txt\n"), 0o644)
		env := append(s.Env(), "WITHRUNTIME_API_KEY="+s.Key)
		out, errs, code := cli(t, env, "template", "build", "-t", "team/on-archive", dir)
		if code != 0 || !strings.HasPrefix(out, "team/on-archive:latest\ttpl_") || !strings.Contains(errs, "reading the image archive img.tar") {
			t.Fatalf("template build: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
		}
		id := startFrom(t, "team/on-archive")
		if got := cat(id, "/srv/archive.txt") + cat(id, "/srv/from-image.txt"); got != "from the archive, from-image\nshell image\n" {
			t.Errorf("a sandbox of the build reads %q", got)
		}
		out, errs, code = cli(t, env, "template", "build", "-t", "team/on-archive", dir)
		if code != 0 || !strings.Contains(errs, "stored already") || !strings.Contains(errs, "(cached)") {
			t.Errorf("the rebuild: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
		}
	})
}

// shellImage is an image with a shell and nothing else of note: the
// host's dash as /bin/sh and the C library it loads, a file in /srv, and
// FOO in its config's env.
func shellImage(t *testing.T) v1.Image {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Skipf("no %s on this host for the shell image: %v", p, err)
		}
		return string(b)
	}
	img, err := mutate.AppendLayers(empty.Image,
		layerOf(t,
			tarEntry{name: "bin/", kind: tar.TypeDir, mode: 0o755},
			tarEntry{name: "bin/sh", body: read("/bin/dash"), mode: 0o755},
			tarEntry{name: "lib/", kind: tar.TypeDir, mode: 0o755},
			tarEntry{name: "lib/x86_64-linux-gnu/", kind: tar.TypeDir, mode: 0o755},
			tarEntry{name: "lib/x86_64-linux-gnu/libc.so.6", body: read("/lib/x86_64-linux-gnu/libc.so.6"), mode: 0o755},
			tarEntry{name: "lib64/", kind: tar.TypeDir, mode: 0o755},
			tarEntry{name: "lib64/ld-linux-x86-64.so.2", body: read("/lib64/ld-linux-x86-64.so.2"), mode: 0o755},
		),
		layerOf(t, tarEntry{name: "srv/", kind: tar.TypeDir, mode: 0o755}, tarEntry{name: "srv/from-image.txt", body: "shell image\n"}))
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, v1.Config{Env: []string{"FOO=from-image", "PATH=/bin"}}); err != nil {
		t.Fatal(err)
	}
	return img
}
