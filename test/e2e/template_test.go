package e2e

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// tpl is one key's view of a server's templates, through the CLI and the
// API as a user would reach them.
type tpl struct {
	t   *testing.T
	s   *testenv.Server
	key string
}

func (c tpl) do(method, path, body string) (int, []byte) {
	c.t.Helper()
	var r *strings.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	if r == nil {
		return call(c.t, c.s, c.key, method, path, nil)
	}
	return call(c.t, c.s, c.key, method, path, r)
}

func (c tpl) snapshot(id, name string) (int, api.Template, string) {
	c.t.Helper()
	st, data := c.do("POST", "/v1/sandboxes/"+id+"/snapshot", `{"template":"`+name+`"}`)
	var out api.Template
	if st == http.StatusCreated {
		if err := json.Unmarshal(data, &out); err != nil {
			c.t.Fatalf("snapshot answered %s", data)
		}
	}
	return st, out, errorCode(data)
}

// sh runs script in sandbox id and returns its stdout; it fails the test
// on a non-zero exit.
func (c tpl) sh(id, script string) string {
	c.t.Helper()
	env := append(c.s.Env(), "WITHRUNTIME_API_KEY="+c.key)
	out, errs, code := cli(c.t, env, "sandbox", "exec", id, "--", "sh", "-c", script)
	if code != 0 {
		c.t.Fatalf("exec %q: exit %d\nstdout: %s\nstderr: %s", script, code, out, errs)
	}
	return out
}

// layerDirs lists the stored layers of a server's data dir.
func layerDirs(t *testing.T, dataDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dataDir, "templates", "layers", "sha256"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestTemplateFromSnapshot: what an agent set up in a running sandbox
// becomes a template; sandboxes from it (and from a snapshot of one of
// those) see the files, the removals and the installed module; it is the
// account's alone; the name's bad forms are refused; a template removed
// while in use keeps working for its sandboxes and its storage goes after
// the last one; pause and resume keep a template's root.
func TestTemplateFromSnapshot(t *testing.T) {
	s := testenv.StartServer(t, "--max-templates", "3")
	newAccount(t, s, `{"name":"other"}`)
	stranger := newKey(t, s, `{"account":"other"}`)
	c := tpl{t, s, s.Key}
	sb := sbx{t, s, s.Key}
	create := func(body string) api.Sandbox {
		t.Helper()
		st, out, code := sb.create(body)
		if st != http.StatusCreated {
			t.Fatalf("create %s: %d %s", body, st, code)
		}
		t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+out.ID, nil) })
		return out
	}

	a := create(`{"vcpus":1,"memory_mib":512}`)
	c.sh(a.ID, `set -e
mkdir -p /workspace/proj && echo hello > /workspace/proj/hello.txt
sudo rm -rf /usr/share/doc/curl
sudo mkdir -p /usr/local/lib/python3/dist-packages/wrpkg
echo 'X = 42' | sudo tee /usr/local/lib/python3/dist-packages/wrpkg/__init__.py >/dev/null
sudo ln -s /etc/shadow /opt/shadow-link
sudo sh -c 'echo root-only > /opt/secret && chmod 600 /opt/secret'
sudo mknod /opt/null-dev c 1 3`)
	// A device node is no file a template holds: the snapshot says which.
	if st, _, code := c.snapshot(a.ID, "team/app:v1"); st != http.StatusBadRequest || code != "invalid_request" {
		t.Fatalf("snapshot of a sandbox with a device node: %d %s", st, code)
	}
	c.sh(a.ID, "sudo rm /opt/null-dev")
	st, v1, code := c.snapshot(a.ID, "team/app:v1")
	if st != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", st, code)
	}
	if v1.Name != "team/app" || v1.Tag != "v1" || v1.Source != "snapshot" || v1.Base != "default" || v1.Layers != 1 || v1.SizeBytes <= 0 || v1.State != "ready" {
		t.Fatalf("snapshot answered %+v", v1)
	}
	// The sandbox snapshotted goes on as it was.
	if out := c.sh(a.ID, "cat /workspace/proj/hello.txt"); out != "hello\n" {
		t.Fatalf("the snapshotted sandbox reads %q", out)
	}
	// Nothing the sandbox made points out of its layer on the host: the
	// link is a link, no device but whiteouts is stored.
	layersRoot := filepath.Join(s.DataDir, "templates", "layers")
	filepath.WalkDir(layersRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		if fi.Mode()&fs.ModeDevice != 0 {
			if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Rdev != 0 {
				t.Errorf("a device node other than a whiteout is stored: %s", p)
			}
		}
		if strings.HasSuffix(p, "opt/shadow-link") && fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s is not stored as a symbolic link", p)
		}
		return nil
	})

	b := create(`{"template":"team/app:v1","vcpus":1,"memory_mib":512}`)
	if b.Template != "team/app:v1" || b.Image != "team/app:v1" {
		t.Errorf("a sandbox of the template shows template %q image %q", b.Template, b.Image)
	}
	out := c.sh(b.ID, `cat /workspace/proj/hello.txt
test -e /usr/share/doc/curl && echo curl-doc || echo no-curl-doc
PYTHONPATH=/usr/local/lib/python3/dist-packages python3 -c 'import wrpkg; print(wrpkg.X)'
readlink /opt/shadow-link
sudo cat /opt/secret; stat -c %a /opt/secret
test -e /usr/share/doc/git && echo base-kept`)
	if want := "hello\nno-curl-doc\n42\n/etc/shadow\nroot-only\n600\nbase-kept\n"; out != want {
		t.Errorf("a sandbox of the template reads %q, want %q", out, want)
	}
	// Its own writes stay its own: the template does not change.
	c.sh(b.ID, "echo changed > /workspace/proj/hello.txt && echo more > /workspace/proj/b.txt")
	st, v2, code := c.snapshot(b.ID, "team/app:v2")
	if st != http.StatusCreated || v2.Layers != 2 {
		t.Fatalf("snapshot of a template's sandbox: %d %s %+v", st, code, v2)
	}
	d := create(`{"template":"team/app:v2","vcpus":1,"memory_mib":512}`)
	if out := c.sh(d.ID, "cat /workspace/proj/hello.txt /workspace/proj/b.txt; test -e /usr/share/doc/curl || echo still-gone"); out != "changed\nmore\nstill-gone\n" {
		t.Errorf("two layers stacked read %q", out)
	}
	e := create(`{"image":"team/app:v1","vcpus":1,"memory_mib":512}`)
	if out := c.sh(e.ID, "cat /workspace/proj/hello.txt"); out != "hello\n" {
		t.Errorf("the first template changed under a snapshot of its sandbox: %q", out)
	}

	t.Run("listed and found by name", func(t *testing.T) {
		st, data := c.do("GET", "/v1/templates", "")
		var list api.TemplateList
		if st != 200 || json.Unmarshal(data, &list) != nil || len(list.Templates) != 2 || list.Templates[0].Tag != "v1" || list.Templates[1].Tag != "v2" {
			t.Errorf("list: %d %s", st, data)
		}
		st, data = c.do("GET", "/v1/templates/team%2Fapp:v2", "")
		var got api.Template
		if st != 200 || json.Unmarshal(data, &got) != nil || got.ID != v2.ID {
			t.Errorf("get: %d %s", st, data)
		}
		if st, data := c.do("GET", "/v1/templates/team%2Fapp", ""); st != 404 || errorCode(data) != "not_found" {
			t.Errorf("get of tag latest, which is not made: %d %s", st, data)
		}
	})

	t.Run("another account sees none of it", func(t *testing.T) {
		o := tpl{t, s, stranger.Secret}
		if st, data := o.do("GET", "/v1/templates/team%2Fapp:v1", ""); st != 404 {
			t.Errorf("get: %d %s", st, data)
		}
		if st, data := o.do("POST", "/v1/sandboxes", `{"template":"team/app:v1"}`); st != 404 || errorCode(data) != "not_found" {
			t.Errorf("create: %d %s", st, data)
		}
		if st, data := o.do("DELETE", "/v1/templates/team%2Fapp:v1", ""); st != 404 {
			t.Errorf("delete: %d %s", st, data)
		}
		if st, _, code := o.snapshot(a.ID, "mine"); st != 404 {
			t.Errorf("snapshot of another account's sandbox: %d %s", st, code)
		}
		st, data := o.do("GET", "/v1/templates", "")
		if st != 200 || strings.Contains(string(data), "team/app") {
			t.Errorf("list: %d %s", st, data)
		}
	})

	t.Run("published by the admin", func(t *testing.T) {
		o := tpl{t, s, stranger.Secret}
		if st, data := o.do("POST", "/v1/templates/team%2Fapp:v1/publish", `{"public":true}`); st != http.StatusForbidden {
			t.Errorf("a publish with an account's key: %d %s", st, data)
		}
		st, data := c.do("POST", "/v1/templates/team%2Fapp:v1/publish", `{"public":true}`)
		var pub api.Template
		if st != 200 || json.Unmarshal(data, &pub) != nil || !pub.Public {
			t.Fatalf("publish: %d %s", st, data)
		}
		if st, data := o.do("GET", "/v1/templates/team%2Fapp:v1", ""); st != 200 {
			t.Errorf("another account's get of a public template: %d %s", st, data)
		}
		st, data = o.do("POST", "/v1/sandboxes", `{"template":"team/app:v1","vcpus":1,"memory_mib":512}`)
		var theirs api.Sandbox
		if st != http.StatusCreated || json.Unmarshal(data, &theirs) != nil {
			t.Fatalf("another account's create of a public template: %d %s", st, data)
		}
		if out := o.sh(theirs.ID, "cat /workspace/proj/hello.txt"); out != "hello\n" {
			t.Errorf("another account's sandbox of the public template reads %q", out)
		}
		call(t, s, stranger.Secret, "DELETE", "/v1/sandboxes/"+theirs.ID, nil)
		if st, data := o.do("DELETE", "/v1/templates/team%2Fapp:v1", ""); st != http.StatusForbidden {
			t.Errorf("another account's delete of a public template: %d %s", st, data)
		}
		if st, data := c.do("POST", "/v1/templates/team%2Fapp:v1/publish", `{"public":false}`); st != 200 {
			t.Fatalf("unpublish: %d %s", st, data)
		}
		if st, data := o.do("GET", "/v1/templates/team%2Fapp:v1", ""); st != 404 {
			t.Errorf("another account's get after it was taken back: %d %s", st, data)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct{ method, path, body, code string }{
			{"POST", "/v1/sandboxes/" + a.ID + "/snapshot", `{"template":"Bad Name"}`, "invalid_request"},
			{"POST", "/v1/sandboxes/" + a.ID + "/snapshot", `{"template":"a/b/c"}`, "invalid_request"},
			{"POST", "/v1/sandboxes/" + a.ID + "/snapshot", `{"template":"x:-tag"}`, "invalid_request"},
			{"POST", "/v1/sandboxes/" + a.ID + "/snapshot", `{}`, "invalid_request"},
			{"POST", "/v1/sandboxes/sbx0000000000000000/snapshot", `{"template":"x"}`, "not_found"},
			{"POST", "/v1/sandboxes", `{"template":"Bad Name"}`, "invalid_request"},
			{"POST", "/v1/sandboxes", `{"template":"nope"}`, "not_found"},
			{"POST", "/v1/sandboxes", `{"template":"team/app:v1","image":"default"}`, "invalid_request"},
			{"GET", "/v1/templates/..", "", ""},
			{"GET", "/v1/templates/a%2Fb%2Fc", "", "invalid_request"},
		} {
			st, data := c.do(tc.method, tc.path, tc.body)
			if tc.code == "" {
				if st < 400 {
					t.Errorf("%s %s %s: %d %s, want a refusal", tc.method, tc.path, tc.body, st, data)
				}
				continue
			}
			if errorCode(data) != tc.code {
				t.Errorf("%s %s %s: %d %s, want %s", tc.method, tc.path, tc.body, st, data, tc.code)
			}
		}
	})

	t.Run("quota", func(t *testing.T) {
		if st, _, _ := c.snapshot(a.ID, "third"); st != http.StatusCreated {
			t.Fatalf("the third template: %d", st)
		}
		if st, _, code := c.snapshot(a.ID, "fourth"); st != http.StatusForbidden || code != "forbidden" {
			t.Errorf("a template past --max-templates 3: %d %s", st, code)
		}
		// A rebuild of a name the account holds does not count twice.
		if st, _, code := c.snapshot(a.ID, "third"); st != http.StatusCreated {
			t.Errorf("replacing a template at the quota: %d %s", st, code)
		}
		if st, data := c.do("DELETE", "/v1/templates/third", ""); st != 200 {
			t.Errorf("delete: %d %s", st, data)
		}
	})

	t.Run("pause and resume keep the root", func(t *testing.T) {
		if st, data := c.do("POST", "/v1/sandboxes/"+d.ID+"/pause", ""); st != 200 {
			t.Fatalf("pause: %d %s", st, data)
		}
		if st, data := c.do("POST", "/v1/sandboxes/"+d.ID+"/resume", ""); st != 200 {
			t.Fatalf("resume: %d %s", st, data)
		}
		if out := c.sh(d.ID, "cat /workspace/proj/b.txt"); out != "more\n" {
			t.Errorf("after resume: %q", out)
		}
	})

	t.Run("removed while in use", func(t *testing.T) {
		before := layerDirs(t, s.DataDir)
		if len(before) < 2 {
			t.Fatalf("layers stored: %v", before)
		}
		for _, name := range []string{"team%2Fapp:v1", "team%2Fapp:v2"} {
			st, data := c.do("DELETE", "/v1/templates/"+name, "")
			var got api.Template
			if st != 200 || json.Unmarshal(data, &got) != nil || got.State != "deleting" {
				t.Fatalf("delete %s: %d %s", name, st, data)
			}
		}
		if st, data := c.do("POST", "/v1/sandboxes", `{"template":"team/app:v1"}`); st != 404 {
			t.Errorf("create of a removed template: %d %s", st, data)
		}
		// Its sandboxes go on, through a collection or two.
		time.Sleep(30 * time.Second)
		for _, id := range []string{b.ID, d.ID, e.ID} {
			if out := c.sh(id, "cat /workspace/proj/hello.txt"); out == "" {
				t.Errorf("sandbox %s lost its root", id)
			}
		}
		// v1's and v2's layers stay (the quota's "third", removed and
		// unused, may be gone by now).
		if got := layerDirs(t, s.DataDir); len(got) < 2 {
			t.Errorf("layers freed while in use: %v, were %v", got, before)
		}
		for _, id := range []string{b.ID, d.ID, e.ID} {
			call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+id, nil)
		}
		deadline := time.Now().Add(60 * time.Second)
		for len(layerDirs(t, s.DataDir)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("layers still stored a minute after their last sandbox ended: %v", layerDirs(t, s.DataDir))
			}
			time.Sleep(time.Second)
		}
	})
}

// TestTemplatePoolHit: a warm pool of a template (serve --pool
// NAME:SIZE=N) boots its members from the template once it exists, and a
// create of that template and size is handed one: the same sandbox the
// pool booted, with the template's files.
func TestTemplatePoolHit(t *testing.T) {
	s := testenv.StartServer(t, "--pool", "pooled:1x1024=1", "--overcommit", "16")
	c := tpl{t, s, s.Key}
	st, src, code := sbx{t, s, s.Key}.create(`{"vcpus":1,"memory_mib":512}`)
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, code)
	}
	c.sh(src.ID, "echo warm > /workspace/warm.txt")
	if st, _, code := c.snapshot(src.ID, "pooled"); st != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", st, code)
	}
	call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+src.ID, nil)
	members := poolMembers(t, s, 1)
	st, got, code := sbx{t, s, s.Key}.create(`{"template":"pooled","vcpus":1,"memory_mib":1024}`)
	if st != http.StatusCreated {
		t.Fatalf("create from the pooled template: %d %s", st, code)
	}
	t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+got.ID, nil) })
	if got.ID != members[0] {
		t.Errorf("the create got %s, not the pool's member %s", got.ID, members[0])
	}
	if out := c.sh(got.ID, "cat /workspace/warm.txt"); out != "warm\n" {
		t.Errorf("the pooled sandbox reads %q", out)
	}
}

// TestTemplateOnMicroVM: a template made on gVisor starts a microVM too:
// its layers become one ext4 disk, made on its first microVM and shared
// after; the template's workdir reaches the guest's agent; the disk goes
// with the template.
func TestTemplateOnMicroVM(t *testing.T) {
	testenv.RequiresMicroVM(t)
	s := testenv.StartServer(t, "--microvm-accel", "tcg", "--overcommit", "16")
	c := tpl{t, s, s.Key}
	st, src, code := sbx{t, s, s.Key}.create(`{"isolation":"gvisor","vcpus":1,"memory_mib":512}`)
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, code)
	}
	c.sh(src.ID, "echo on-both-tiers > /workspace/tiers.txt && sudo rm -rf /usr/share/doc/curl")
	if st, _, code := c.snapshot(src.ID, "tiers"); st != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", st, code)
	}
	call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+src.ID, nil)
	st, vm, code := sbx{t, s, s.Key}.create(`{"isolation":"microvm","template":"tiers","vcpus":1,"memory_mib":1024}`)
	if st != http.StatusCreated {
		t.Fatalf("create a microVM of the template: %d %s\n%s", st, code, s.Log)
	}
	if out := c.sh(vm.ID, "cat /workspace/tiers.txt; test -e /usr/share/doc/curl || echo gone; uname -r"); !strings.HasPrefix(out, "on-both-tiers\ngone\n") {
		t.Errorf("the microVM of the template reads %q", out)
	}
	disks, _ := filepath.Glob(filepath.Join(s.DataDir, "templates", "stacks", "*.ext4"))
	if len(disks) != 1 {
		t.Errorf("template disks: %v, want one", disks)
	}
	call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+vm.ID, nil)
	if st, data := c.do("DELETE", "/v1/templates/tiers", ""); st != 200 {
		t.Fatalf("delete: %d %s", st, data)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		disks, _ = filepath.Glob(filepath.Join(s.DataDir, "templates", "stacks", "*.ext4"))
		if len(disks) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the template's disk is still there a minute after it was removed: %v", disks)
		}
		time.Sleep(time.Second)
	}
}
