package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// builder is one key's view of a server's template builds, through the API.
type builder struct {
	t   *testing.T
	s   *testenv.Server
	key string
}

// buildTar is the tar form of a build: the spec, then the context files.
func buildTar(t *testing.T, spec any, files map[string]string) []byte {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name, body string, mode int64) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	add(api.BuildSpecEntry, string(data), 0o644)
	for name, body := range files {
		add(name, body, 0o644)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// start posts a build; it fails the test unless the answer is 202.
func (b builder) start(body []byte, ctype string) api.TemplateBuild {
	b.t.Helper()
	st, data := b.post(body, ctype)
	var out api.TemplateBuild
	if st != http.StatusAccepted || json.Unmarshal(data, &out) != nil || out.ID == "" {
		b.t.Fatalf("POST /v1/templates: %d %s", st, data)
	}
	return out
}

func (b builder) post(body []byte, ctype string) (int, []byte) {
	b.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "POST", b.s.URL+"/v1/templates", bytes.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

// follow reads the build's log until it ends and returns its events.
func (b builder) follow(id string) []api.BuildLogEvent {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.s.URL+"/v1/templates/builds/"+id+"/logs", nil)
	req.Header.Set("Authorization", "Bearer "+b.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b.t.Fatalf("logs: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var evs []api.BuildLogEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev api.BuildLogEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			b.t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != api.BuildLogEnd {
		b.t.Fatalf("the log ended without its end event: %+v", evs)
	}
	return evs
}

func (b builder) get(id string) (int, api.TemplateBuild) {
	b.t.Helper()
	st, data := call(b.t, b.s, b.key, "GET", "/v1/templates/builds/"+id, nil)
	var out api.TemplateBuild
	json.Unmarshal(data, &out)
	return st, out
}

// run builds and waits for the end: the build as it ended, its log, and
// how long it took from the POST.
func (b builder) run(body []byte, ctype string) (api.TemplateBuild, []api.BuildLogEvent, time.Duration) {
	b.t.Helper()
	t0 := time.Now()
	bl := b.start(body, ctype)
	evs := b.follow(bl.ID)
	d := time.Since(t0)
	st, got := b.get(bl.ID)
	if st != 200 {
		b.t.Fatalf("GET build %s: %d", bl.ID, st)
	}
	return got, evs, d
}

// sandboxesOf counts the sandboxes build id ran (every state).
func (b builder) sandboxesOf(id string) int {
	b.t.Helper()
	return len(b.sandboxList(id))
}

// sandboxList lists the sandboxes build id ran (every state).
func (b builder) sandboxList(id string) []api.Sandbox {
	b.t.Helper()
	st, data := call(b.t, b.s, b.key, "GET", "/v1/sandboxes?metadata="+url.QueryEscape("withruntime.build="+id), nil)
	var list api.SandboxList
	if st != 200 || json.Unmarshal(data, &list) != nil {
		b.t.Fatalf("list: %d %s", st, data)
	}
	return list.Sandboxes
}

// stepsCached returns, for each step event, whether it was cached.
func stepsCached(evs []api.BuildLogEvent) map[int]bool {
	out := map[int]bool{}
	for _, e := range evs {
		if e.Type == api.BuildLogStep {
			out[e.Step] = e.Cached
		}
	}
	return out
}

func logText(evs []api.BuildLogEvent) string {
	var sb strings.Builder
	for _, e := range evs {
		sb.WriteString(e.Type + " " + e.Message + "\n")
	}
	return sb.String()
}

const buildDockerfile = `FROM default
ENV GREETING=hello
RUN mkdir -p /opt/app && echo built > /opt/app/built.txt && echo step-output-marker
COPY app.txt /opt/app/
WORKDIR /opt/app
RUN echo "$GREETING from $(pwd)" > greeting.txt
CMD ["sleep", "infinity"]
`

// TestTemplateBuild: a Dockerfile build runs its RUN and COPY steps in
// sandboxes of the account (no internet) and makes a template whose
// sandboxes see the files and env; the same build again is taken whole
// from the cache (no sandbox); a changed last step runs that step only; a
// failing step fails the build, naming it, and makes no template; another
// account sees no build; a server restart in the middle of a build fails
// it cleanly.
func TestTemplateBuild(t *testing.T) {
	s := testenv.StartServer(t, "--allow-trial")
	b := builder{t, s, s.Key}
	c := tpl{t, s, s.Key}
	ctxFiles := map[string]string{"app.txt": "from-context\n"}
	spec := map[string]any{"name": "team/built:v1", "dockerfile": buildDockerfile}

	cold, evs, coldTook := b.run(buildTar(t, spec, ctxFiles), "application/x-tar")
	if cold.State != api.BuildSucceeded || cold.Steps != 5 || cold.CachedSteps != 0 || cold.Result == nil {
		t.Fatalf("the build ended %+v %+v\n%s", cold, cold.Error, logText(evs))
	}
	if r := cold.Result; r.Name != "team/built" || r.Tag != "v1" || r.Source != "build" || r.Layers != 3 ||
		r.Defaults.Env["GREETING"] != "hello" || r.Defaults.Workdir != "/opt/app" || r.Defaults.StartCmd != "sleep infinity" {
		t.Errorf("the template made: %+v", r)
	}
	if !strings.Contains(logText(evs), "step-output-marker") {
		t.Errorf("the log lacks a step's output:\n%s", logText(evs))
	}
	if l := b.sandboxList(cold.ID); len(l) != 3 {
		t.Errorf("the cold build ran %d sandboxes, want 3 (one a RUN or COPY step)", len(l))
	} else {
		for _, sb := range l {
			if sb.State != "ended" || sb.Network.Internet {
				t.Errorf("a build sandbox after the build: %s, internet %v", sb.State, sb.Network.Internet)
			}
		}
	}

	st, box, code := sbx{t, s, s.Key}.create(`{"template":"team/built:v1","vcpus":1,"memory_mib":512}`)
	if st != http.StatusCreated {
		t.Fatalf("create from the built template: %d %s", st, code)
	}
	t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+box.ID, nil) })
	if out := c.sh(box.ID, "cat /opt/app/built.txt /opt/app/app.txt /opt/app/greeting.txt; echo $GREETING"); out != "built\nfrom-context\nhello from /opt/app\nhello\n" {
		t.Errorf("a sandbox of the template reads %q", out)
	}

	// The same build again: every step from the cache, no sandbox.
	warm, evs, warmTook := b.run(buildTar(t, spec, ctxFiles), "application/x-tar")
	t.Logf("build durations: cold %v, fully cached %v", coldTook, warmTook)
	if warm.State != api.BuildSucceeded || warm.CachedSteps != 3 {
		t.Fatalf("the cached build ended %+v\n%s", warm, logText(evs))
	}
	if n := b.sandboxesOf(warm.ID); n != 0 {
		t.Errorf("the cached build ran %d sandboxes", n)
	}
	if warm.Result.Layers != 3 || warmTook > coldTook/2 {
		t.Errorf("the cached build: %d layers, took %v (cold %v)", warm.Result.Layers, warmTook, coldTook)
	}

	// The last RUN changed: it alone runs.
	changed := map[string]any{"name": "team/built:v2", "dockerfile": strings.Replace(buildDockerfile, `"$GREETING from $(pwd)"`, `"$GREETING again"`, 1)}
	v2, evs, v2Took := b.run(buildTar(t, changed, ctxFiles), "application/x-tar")
	t.Logf("build with the last step changed: %v", v2Took)
	if v2.State != api.BuildSucceeded || v2.CachedSteps != 2 {
		t.Fatalf("the changed build ended %+v\n%s", v2, logText(evs))
	}
	if got := stepsCached(evs); !got[2] || !got[3] || got[5] {
		t.Errorf("cached steps: %v\n%s", got, logText(evs))
	}
	if n := b.sandboxesOf(v2.ID); n != 1 {
		t.Errorf("the changed build ran %d sandboxes, want 1", n)
	}

	t.Run("through the CLI", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(buildDockerfile), 0o644)
		os.WriteFile(filepath.Join(dir, "app.txt"), []byte("from-context\n"), 0o644)
		env := append(s.Env(), "WITHRUNTIME_API_KEY="+s.Key)
		out, errs, code := cli(t, env, "template", "build", "-t", "team/cli", dir)
		if code != 0 || !strings.HasPrefix(out, "team/cli:latest\ttpl_") {
			t.Fatalf("template build: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
		}
		// The same steps as the first build: all from the cache.
		for _, want := range []string{"step 1/5: env GREETING", "step 2/5: run (as root) mkdir -p /opt/app", "(cached)", "3 of 5 steps from the cache"} {
			if !strings.Contains(errs, want) {
				t.Errorf("the CLI's progress lacks %q:\n%s", want, errs)
			}
		}
		os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM default\nRUN echo cli-fails && exit 3\n"), 0o644)
		out, errs, code = cli(t, env, "template", "build", "-t", "team/cli-broken", dir)
		if code == 0 || out != "" || !strings.Contains(errs, "cli-fails") || !strings.Contains(errs, "failed at step 1 of 1") || !strings.Contains(errs, "exited with code 3") {
			t.Errorf("a failing build through the CLI: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
		}
	})

	t.Run("from steps: a directory copied with its owner and mode, a user step", func(t *testing.T) {
		steps := map[string]any{"name": "team/steps", "steps": []any{
			map[string]any{"copy": map[string]any{"src": "tree/", "dest": "/opt/tree", "user": "user", "mode": "0750"}},
			map[string]any{"user": "user"},
			map[string]any{"workdir": "/home/user"},
			map[string]any{"run": "id -un > who.txt && ls /opt/tree/sub >> who.txt"},
		}, "start_cmd": "sleep infinity"}
		files := map[string]string{"tree/a.txt": "a\n", "tree/sub/b.txt": "b\n", "elsewhere.txt": "not copied\n"}
		got, evs, _ := b.run(buildTar(t, steps, files), "application/x-tar")
		if got.State != api.BuildSucceeded || got.Result.Layers != 2 || got.Result.Defaults.User != "user" {
			t.Fatalf("the build ended %+v %+v\n%s", got, got.Error, logText(evs))
		}
		_, box, code := sbx{t, s, s.Key}.create(`{"template":"team/steps","vcpus":1,"memory_mib":512}`)
		if box.ID == "" {
			t.Fatalf("create: %s", code)
		}
		t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+box.ID, nil) })
		out := c.sh(box.ID, "stat -c '%U %a' /opt/tree/a.txt /opt/tree/sub/b.txt /opt; cat /home/user/who.txt; test -e /opt/tree/elsewhere.txt || echo only-src")
		if want := "user 750\nuser 750\nroot 755\nuser\nb.txt\nonly-src\n"; out != want {
			t.Errorf("a sandbox of the steps' template reads %q, want %q", out, want)
		}
	})

	t.Run("on a built template", func(t *testing.T) {
		body, _ := json.Marshal(map[string]any{"name": "team/on-built", "from": map[string]any{"template": "team/built:v1"},
			"steps": []any{map[string]any{"run": "echo \"$GREETING $(cat /opt/app/built.txt)\" > /opt/app/more.txt", "user": "root"}}})
		got, evs, _ := b.run(body, "application/json")
		if got.State != api.BuildSucceeded || got.Result.Layers != 4 || got.Result.Defaults.Env["GREETING"] != "hello" || got.Result.Defaults.Workdir != "/opt/app" {
			t.Fatalf("the build ended %+v %+v\n%s", got, got.Result, logText(evs))
		}
		_, box, code := sbx{t, s, s.Key}.create(`{"template":"team/on-built","vcpus":1,"memory_mib":512}`)
		if box.ID == "" {
			t.Fatalf("create: %s", code)
		}
		t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+box.ID, nil) })
		if out := c.sh(box.ID, "cat /opt/app/more.txt /opt/app/app.txt"); out != "hello built\nfrom-context\n" {
			t.Errorf("a sandbox of the template on a template reads %q", out)
		}
	})

	t.Run("the network the build asks for", func(t *testing.T) {
		body, _ := json.Marshal(map[string]any{"name": "team/net", "network": map[string]any{"internet": true, "allow": []string{"pkgs.example.org"}},
			"steps": []any{map[string]any{"run": "true"}}})
		got, evs, _ := b.run(body, "application/json")
		if got.State != api.BuildSucceeded {
			t.Fatalf("the build ended %+v\n%s", got, logText(evs))
		}
		l := b.sandboxList(got.ID)
		if len(l) != 1 || !l[0].Network.Internet || len(l[0].Network.Allow) != 1 || l[0].Network.Allow[0] != "pkgs.example.org" {
			t.Errorf("the build's sandbox: %+v", l)
		}
	})

	t.Run("a failing step fails the build", func(t *testing.T) {
		bad := map[string]any{"name": "team/broken", "steps": []any{
			map[string]any{"run": "echo about-to-fail; exit 3"},
		}}
		body, _ := json.Marshal(bad)
		got, evs, _ := b.run(body, "application/json")
		if got.State != api.BuildFailed || got.Step != 1 || got.Error == nil || got.Error.Code != "invalid_request" ||
			!strings.Contains(got.Error.Message, "step 1") || !strings.Contains(got.Error.Message, "exited with code 3") {
			t.Fatalf("a failing build ended %+v %+v", got, got.Error)
		}
		if !strings.Contains(logText(evs), "about-to-fail") {
			t.Errorf("the log lacks the failing step's output:\n%s", logText(evs))
		}
		if st, data := call(t, s, s.Key, "GET", "/v1/templates/team%2Fbroken", nil); st != 404 {
			t.Errorf("a failed build made a template: %d %s", st, data)
		}
	})

	t.Run("refused before anything runs", func(t *testing.T) {
		for _, body := range []string{
			`{"name":"team/x","dockerfile":"FROM default\nEXPOSE 80\n"}`,
			`{"name":"team/x","from":{"template":"nope"},"steps":[{"run":"true"}]}`,
			`{"name":"withruntime-build/x","steps":[{"run":"true"}]}`,
		} {
			st, data := b.post([]byte(body), "application/json")
			if st != 400 && st != 404 {
				t.Errorf("%s: %d %s", body, st, data)
			}
		}
		var steps []any
		for range 33 {
			steps = append(steps, map[string]any{"run": "true"})
		}
		body, _ := json.Marshal(map[string]any{"name": "team/tall", "steps": steps})
		if st, data := b.post(body, "application/json"); st != 400 || !strings.Contains(string(data), "33 layers") {
			t.Errorf("a build of 33 layers: %d %s", st, data)
		}
	})

	t.Run("a registry the server may not reach fails the build", func(t *testing.T) {
		// Without --allow-private-registries a loopback registry is
		// refused when the build runs (the request is accepted).
		body, _ := json.Marshal(map[string]any{"name": "team/unreachable", "from": map[string]any{"image": "127.0.0.1:9/team/app:v1"}, "steps": []any{map[string]any{"run": "true"}}})
		got, evs, _ := b.run(body, "application/json")
		if got.State != api.BuildFailed || got.Error == nil || got.Error.Code != "invalid_request" || !strings.Contains(got.Error.Message, "not a public address") {
			t.Fatalf("the build ended %+v %+v\n%s", got, got.Error, logText(evs))
		}
		if !strings.Contains(logText(evs), "pulling 127.0.0.1:9/team/app:v1") || b.sandboxesOf(got.ID) != 0 {
			t.Errorf("the failed pull: %d sandboxes\n%s", b.sandboxesOf(got.ID), logText(evs))
		}
	})

	t.Run("a trial's build sandboxes are a trial's size", func(t *testing.T) {
		st, data := call(t, s, "", "POST", "/v1/trial", nil)
		var trial api.Trial
		if st != 201 || json.Unmarshal(data, &trial) != nil || trial.Key == "" {
			t.Fatalf("trial: %d %s", st, data)
		}
		tb := builder{t, s, trial.Key}
		if st, data := tb.post([]byte(`{"name":"big","vcpus":4,"steps":[{"run":"true"}]}`), "application/json"); st != 403 || errorCode(data) != "forbidden" {
			t.Errorf("a trial's build past its size: %d %s", st, data)
		}
	})

	t.Run("another account sees no build", func(t *testing.T) {
		newAccount(t, s, `{"name":"other"}`)
		stranger := newKey(t, s, `{"account":"other"}`)
		o := builder{t, s, stranger.Secret}
		if st, _ := o.get(cold.ID); st != 404 {
			t.Errorf("GET another account's build: %d", st)
		}
		if st, data := call(t, s, stranger.Secret, "GET", "/v1/templates/builds/"+cold.ID+"/logs?follow=false", nil); st != 404 {
			t.Errorf("its logs: %d %s", st, data)
		}
		// The build's own sandbox refs are never another account's.
		if st, data := call(t, s, stranger.Secret, "POST", "/v1/sandboxes", strings.NewReader(`{"template":"withruntime-build/`+strings.TrimPrefix(cold.ID, "bld_")+`-2"}`)); st != 404 {
			t.Errorf("create from a build's ref: %d %s", st, data)
		}
	})

	t.Run("a restart fails the build in flight", func(t *testing.T) {
		slow := map[string]any{"name": "team/slow", "steps": []any{map[string]any{"run": "echo started-slow; sleep 120"}}}
		body, _ := json.Marshal(slow)
		bl := b.start(body, "application/json")
		// Wait until its step runs in its sandbox.
		var sandboxID string
		deadline := time.Now().Add(90 * time.Second)
		for sandboxID == "" && time.Now().Before(deadline) {
			_, data := call(t, s, s.Key, "GET", "/v1/templates/builds/"+bl.ID+"/logs?follow=false", nil)
			if strings.Contains(string(data), "started-slow") {
				for _, line := range strings.Split(string(data), "\n") {
					var ev api.BuildLogEvent
					if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == api.BuildLogInfo && strings.HasPrefix(ev.Message, "sandbox ") {
						sandboxID = strings.TrimPrefix(ev.Message, "sandbox ")
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		if sandboxID == "" {
			t.Fatal("the slow step did not start")
		}
		s.Stop(true)
		s.Start()
		if st, _ := b.get(bl.ID); st != 404 {
			t.Errorf("the build after a restart: %d, want not_found (builds are in memory)", st)
		}
		if st, data := call(t, s, s.Key, "GET", "/v1/templates/team%2Fslow", nil); st != 404 {
			t.Errorf("a build cut by a restart made a template: %d %s", st, data)
		}
		var sb api.Sandbox
		deadline = time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			_, data := call(t, s, s.Key, "GET", "/v1/sandboxes/"+sandboxID, nil)
			json.Unmarshal(data, &sb)
			if sb.State == "ended" {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if sb.State != "ended" {
			t.Errorf("the build's sandbox after the restart: %s, want ended", sb.State)
		}
		if ents, _ := os.ReadDir(filepath.Join(s.DataDir, "templates", "builds", "contexts")); len(ents) != 0 {
			t.Errorf("build contexts left after the restart: %v", ents)
		}
	})
}
