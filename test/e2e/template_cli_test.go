package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestTemplateCLI runs the template commands of the CLI against a real
// server: a snapshot of a running sandbox becomes a template that ls and
// get show, a sandbox created from it sees the file the source wrote, and
// once removed it is not found by get or by a create. An image archive
// written here (docker save's layout, one file and no shell) is imported,
// with the image's env as the template's, and a sandbox of it holds the
// file; a tar that is no image is refused.
func TestTemplateCLI(t *testing.T) {
	s := testenv.StartServer(t)
	env := s.Env()
	const name = "e2e-cli/app:v1"

	t.Run("snapshot, ls, get, create from it, rm", func(t *testing.T) {
		out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "1024", "--timeout", "10m", "--json")
		var src api.Sandbox
		if code != 0 || json.Unmarshal([]byte(out), &src) != nil {
			t.Fatalf("create: got %q %q exit %d", out, errs, code)
		}
		defer cli(t, env, "sandbox", "rm", src.ID)
		if out, errs, code := cli(t, env, "sandbox", "exec", src.ID, "--", "sh", "-c", "mkdir -p /workspace/tpl && echo made-in-the-source > /workspace/tpl/mark"); code != 0 {
			t.Fatalf("exec: got %q %q exit %d", out, errs, code)
		}

		out, errs, code = cli(t, env, "sandbox", "snapshot", src.ID, "-t", name)
		fields := strings.Split(strings.TrimSuffix(out, "\n"), "\t")
		if code != 0 || len(fields) != 2 || fields[0] != name || !strings.HasPrefix(fields[1], "tpl_") {
			t.Fatalf("snapshot: got %q %q exit %d, want %q, a tab and the id", out, errs, code, name)
		}
		id := fields[1]
		// The source keeps running, its files as they were.
		if out, _, code := cli(t, env, "sandbox", "exec", src.ID, "--", "cat", "/workspace/tpl/mark"); out != "made-in-the-source\n" || code != 0 {
			t.Fatalf("the source after its snapshot: got %q exit %d", out, code)
		}

		out, errs, code = cli(t, env, "template", "ls")
		var row []string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "e2e-cli/app" {
				row = f
			}
		}
		if code != 0 || len(row) < 6 || row[1] != "v1" || row[2] != "snapshot" || row[4] != "1" {
			t.Fatalf("ls: got row %q of %q (%q) exit %d, want e2e-cli/app v1 snapshot SIZE 1 CREATED", row, out, errs, code)
		}
		out, errs, code = cli(t, env, "template", "get", name, "--json")
		var got api.Template
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("get --json: got %q %q exit %d", out, errs, code)
		}
		if got.ID != id || got.Name != "e2e-cli/app" || got.Tag != "v1" || got.Source != "snapshot" || got.Base != "default" || got.State != "ready" || got.SizeBytes <= 0 {
			t.Errorf("get --json: got %+v, want %s, a snapshot over default, ready, with a size", got, id)
		}

		out, errs, code = cli(t, env, "sandbox", "create", "--template", name, "--vcpus", "1", "--memory", "1024", "--timeout", "10m", "--json")
		var child api.Sandbox
		if code != 0 || json.Unmarshal([]byte(out), &child) != nil {
			t.Fatalf("create --template: got %q %q exit %d", out, errs, code)
		}
		defer cli(t, env, "sandbox", "rm", child.ID)
		if child.Template != name {
			t.Errorf("create --template: the sandbox's template is %q, want %q", child.Template, name)
		}
		if out, errs, code := cli(t, env, "sandbox", "exec", child.ID, "--", "cat", "/workspace/tpl/mark"); out != "made-in-the-source\n" || code != 0 {
			t.Fatalf("a sandbox of the template: got %q %q exit %d, want the source's file", out, errs, code)
		}

		// The admin publishes it: another account sees it and starts from
		// it, cannot publish it, and loses it when the admin takes it back.
		if out, errs, code := cli(t, env, "accounts", "create", "e2e-cli-other"); code != 0 {
			t.Fatalf("accounts create: got %q %q exit %d", out, errs, code)
		}
		out, errs, code = cli(t, env, "keys", "create", "--account", "e2e-cli-other", "--json")
		var otherKey api.Key
		if code != 0 || json.Unmarshal([]byte(out), &otherKey) != nil {
			t.Fatalf("keys create: got %q %q exit %d", out, errs, code)
		}
		other := append(os.Environ(), "WITHRUNTIME_BASE_URL="+s.URL, "WITHRUNTIME_API_KEY="+otherKey.Secret)
		if _, errs, code := cli(t, other, "template", "get", name); code != 1 || !strings.HasPrefix(errs, "error: not_found: ") {
			t.Fatalf("another account before the publish: got %q exit %d, want not_found", errs, code)
		}
		if out, errs, code := cli(t, env, "template", "publish", name); code != 0 || out != name+" public\n" {
			t.Fatalf("publish: got %q %q exit %d", out, errs, code)
		}
		if out, errs, code := cli(t, other, "sandbox", "run", "--template", name, "--", "cat", "/workspace/tpl/mark"); code != 0 || out != "made-in-the-source\n" {
			t.Fatalf("another account's sandbox of the published template: got %q %q exit %d", out, errs, code)
		}
		if _, errs, code := cli(t, other, "template", "publish", "--private", name); code != 1 || !strings.HasPrefix(errs, "error: forbidden: ") {
			t.Errorf("publish with another account's key: got %q exit %d, want forbidden", errs, code)
		}
		if out, errs, code := cli(t, env, "template", "publish", "--private", name); code != 0 || out != name+" private\n" {
			t.Fatalf("publish --private: got %q %q exit %d", out, errs, code)
		}
		if _, errs, code := cli(t, other, "template", "get", name); code != 1 || !strings.HasPrefix(errs, "error: not_found: ") {
			t.Errorf("another account after --private: got %q exit %d, want not_found", errs, code)
		}

		out, errs, code = cli(t, env, "template", "rm", name)
		if code != 0 || out != name+"\n" {
			t.Fatalf("rm: got %q %q exit %d", out, errs, code)
		}
		if _, errs, code := cli(t, env, "template", "get", name); code != 1 || !strings.HasPrefix(errs, "error: not_found: ") {
			t.Errorf("get after rm: got %q exit %d, want not_found and 1", errs, code)
		}
		if _, errs, code := cli(t, env, "sandbox", "run", "--template", name, "--", "true"); code != 125 || !strings.HasPrefix(errs, "error: not_found: ") {
			t.Errorf("run --template after rm: got %q exit %d, want not_found and 125", errs, code)
		}
		// A sandbox started from it keeps it after the rm.
		if out, _, code := cli(t, env, "sandbox", "exec", child.ID, "--", "cat", "/workspace/tpl/mark"); out != "made-in-the-source\n" || code != 0 {
			t.Errorf("a sandbox of the removed template: got %q exit %d, want its files still there", out, code)
		}
	})

	t.Run("import an image archive", func(t *testing.T) {
		dir := t.TempDir()
		archive := filepath.Join(dir, "image.tar")
		if err := os.WriteFile(archive, dockerSave(t, map[string]string{"hello.txt": "hello from the image\n"}), 0o644); err != nil {
			t.Fatal(err)
		}
		const imported = "e2e-cli/imported"
		out, errs, code := cli(t, env, "template", "import", "-t", imported, archive)
		if code != 0 || !strings.HasPrefix(out, imported+":latest\ttpl_") {
			t.Fatalf("import: got %q %q exit %d", out, errs, code)
		}
		out, errs, code = cli(t, env, "template", "get", imported, "--json")
		var got api.Template
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Source != "oci" || got.Base != "" || got.Defaults.Env["IMPORTED"] != "yes" {
			t.Fatalf("get --json: got %q %q exit %d, want source oci, no base, with the image's env", out, errs, code)
		}
		out, errs, code = cli(t, env, "sandbox", "create", "--template", imported, "--vcpus", "1", "--memory", "1024", "--timeout", "10m")
		if code != 0 {
			t.Fatalf("create --template %s: got %q %q exit %d", imported, out, errs, code)
		}
		sbx := strings.TrimSpace(out)
		defer cli(t, env, "sandbox", "rm", sbx)
		// The image has no shell: its file comes back through the files API.
		local := filepath.Join(dir, "hello.txt")
		if out, errs, code := cli(t, env, "sandbox", "cp", sbx+":/hello.txt", local); code != 0 {
			t.Fatalf("cp: got %q %q exit %d", out, errs, code)
		}
		if b, err := os.ReadFile(local); err != nil || string(b) != "hello from the image\n" {
			t.Errorf("the image's file in its sandbox: got %q, %v", b, err)
		}
		if out, errs, code := cli(t, env, "template", "rm", imported); code != 0 || out != imported+":latest\n" {
			t.Errorf("rm: got %q %q exit %d", out, errs, code)
		}
		notImage := filepath.Join(dir, "notes.tar")
		if err := os.WriteFile(notImage, tarOf(t, map[string]string{"notes.txt": "no manifest here\n"}), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errs, code := cli(t, env, "template", "import", "-t", "e2e-cli/not-an-image", notImage); code != 1 || !strings.HasPrefix(errs, "error: invalid_request: ") {
			t.Errorf("import of a tar that is no image: got %q %q exit %d, want invalid_request and 1", out, errs, code)
		}
		if _, _, code := cli(t, env, "template", "get", "e2e-cli/not-an-image"); code != 1 {
			t.Errorf("a refused import left template e2e-cli/not-an-image behind")
		}
	})
}

// tarOf is a tar stream of files (name to content), regular files 0644.
func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// dockerSave is what "docker save" writes for an image of one layer holding
// files, with env IMPORTED=yes: manifest.json, the config (its diff_ids the
// layer's sha256) and the layer.
func dockerSave(t *testing.T, files map[string]string) []byte {
	t.Helper()
	layer := tarOf(t, files)
	sum := sha256.Sum256(layer)
	diffID := "sha256:" + hex.EncodeToString(sum[:])
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Env": []string{"IMPORTED=yes"}, "WorkingDir": "/"},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	csum := sha256.Sum256(config)
	configName := hex.EncodeToString(csum[:]) + ".json"
	layerName := hex.EncodeToString(sum[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{"e2e/imported:latest"}, "Layers": []string{layerName}}})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
