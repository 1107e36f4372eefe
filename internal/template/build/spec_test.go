package build

import (
	"encoding/json"
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/template"
)

func TestSpecRoundTrip(t *testing.T) {
	in := `{
	  "name": "myteam/app:v1",
	  "from": {"template": "default"},
	  "steps": [
	    {"apt_install": ["git", "libpq-dev=15.4-0+deb12u1", "gcc:amd64", "g++", "libstdc++6", "python3.11-venv", "curl/bookworm-backports"]},
	    {"pip_install": ["pandas==2.2.3", "requests[security]>=2.31,<3", "torch==2.1.0+cpu", "Django~=4.2", "foo!=1.0", "pkg===1.0", "numpy"]},
	    {"npm_install": ["@scope/pkg@^1.2.0", "typescript", "JSONStream@1.x", "react@>=16"], "global": true},
	    {"run": "echo hi > /tmp/x", "user": "root"},
	    {"copy": {"src": "app/", "dest": "/workspace/app", "user": "user", "mode": "0755"}},
	    {"env": {"A": "1", "PATH_EXTRA": "/opt/bin"}},
	    {"workdir": "/workspace/app"},
	    {"user": "user", "no_cache": true}
	  ],
	  "no_cache": true,
	  "start_cmd": "python3 -m http.server 8000",
	  "ready_cmd": "curl -sf localhost:8000",
	  "ready_timeout_seconds": 30,
	  "vcpus": 2,
	  "memory_mib": 2048,
	  "network": {"internet": true, "allow": ["pkgs.example", "*.example.org"]}
	}`
	s, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{KindApt, KindPip, KindNpm, KindRun, KindCopy, KindEnv, KindWorkdir, KindUser}
	for i, st := range s.Steps {
		if st.Kind() != kinds[i] {
			t.Errorf("steps[%d].Kind() = %q, want %q", i, st.Kind(), kinds[i])
		}
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Decode(out)
	if err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	if !reflect.DeepEqual(s, again) {
		t.Errorf("round trip changed the spec:\n got %+v\nwant %+v", again, s)
	}
	if got := (&Spec{Name: "a"}).Base(); got.Template != "default" {
		t.Errorf("Base() without from = %+v, want the default template", got)
	}
}

func TestSpecRefused(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"no name", `{}`, "name: bad template name"},
		{"bad name", `{"name": "My App"}`, "name: bad template name"},
		{"bad tag", `{"name": "a:-x"}`, "name: bad template tag"},
		{"default", `{"name": "default"}`, `name: "default" is the built-in image`},
		{"unknown field", `{"name": "a", "colour": 1}`, `unknown field "colour"`},
		{"trailing data", `{"name": "a"} {}`, "data after the JSON value"},
		{"two froms", `{"name": "a", "from": {"template": "b", "image": "c"}}`, "from: give exactly one"},
		{"empty from", `{"name": "a", "from": {}}`, "from: give exactly one"},
		{"bad from template", `{"name": "a", "from": {"template": "B"}}`, "from.template: bad template name"},
		{"bad image", `{"name": "a", "from": {"image": "Ubuntu:24.04"}}`, "from.image: \"Ubuntu:24.04\" is not an image reference"},
		{"image with space", `{"name": "a", "from": {"image": "ubuntu; rm -rf /"}}`, "from.image:"},
		{"scratch", `{"name": "a", "from": {"image": "scratch"}}`, "from.image: scratch is an empty file system"},
		{"archive out", `{"name": "a", "from": {"archive": "../img.tar"}}`, "from.archive:"},
		{"archive abs", `{"name": "a", "from": {"archive": "/img.tar"}}`, "from.archive:"},
		{"dockerfile and steps", `{"name": "a", "dockerfile": "FROM default", "steps": [{"run": "x"}]}`, "dockerfile: give a Dockerfile or from and steps"},
		{"build args alone", `{"name": "a", "build_args": {"A": "1"}}`, "build_args: build args are for a Dockerfile"},
		{"bad build arg", `{"name": "a", "dockerfile": "FROM default", "build_args": {"1A": "1"}}`, "build_args: bad name"},
		{"dockerfile checked on receipt", `{"name": "a", "dockerfile": "FROM default\nEXPOSE 80"}`, "Dockerfile line 2: EXPOSE is not supported"},
		{"dockerfile build arg undeclared", `{"name": "a", "dockerfile": "FROM default", "build_args": {"A": "1"}}`, `build_args: build arg "A" is not declared`},
		{"step not object", `{"name": "a", "steps": ["run"]}`, "steps[0]: a step is an object"},
		{"step null", `{"name": "a", "steps": [null]}`, "steps[0]: a step is an object"},
		{"no action", `{"name": "a", "steps": [{}]}`, "steps[0]: no action"},
		{"two actions", `{"name": "a", "steps": [{"run": "x", "workdir": "/a"}]}`, "steps[0]: one action a step, got run and workdir"},
		{"unknown key", `{"name": "a", "steps": [{"run": "x"}, {"shell": "x"}]}`, `steps[1]: unknown key "shell"`},
		{"null value", `{"name": "a", "steps": [{"run": null}]}`, "steps[0].run: null"},
		{"empty run", `{"name": "a", "steps": [{"run": ""}]}`, "steps[0].run: empty"},
		{"blank run", `{"name": "a", "steps": [{"run": "  \n"}]}`, "steps[0].run: empty"},
		{"empty workdir", `{"name": "a", "steps": [{"workdir": ""}]}`, "steps[0].workdir: empty"},
		{"run user bad", `{"name": "a", "steps": [{"run": "x", "user": "Root"}]}`, "steps[0].user: bad user"},
		{"numeric user", `{"name": "a", "steps": [{"user": "1000"}]}`, "steps[0].user: bad user"},
		{"user on apt", `{"name": "a", "steps": [{"apt_install": ["git"], "user": "root"}]}`, "steps[0].user: only a run step takes a user"},
		{"global on pip", `{"name": "a", "steps": [{"pip_install": ["x"], "global": true}]}`, "steps[0].global: only an npm_install step"},
		{"no packages", `{"name": "a", "steps": [{"apt_install": []}]}`, "steps[0].apt_install: no packages"},
		{"apt hostile", `{"name": "a", "steps": [{"apt_install": ["git", "x; rm -rf /"]}]}`, `steps[0].apt_install[1]: "x; rm -rf /" is not a Debian package name`},
		{"apt subshell", `{"name": "a", "steps": [{"apt_install": ["$(id)"]}]}`, `apt_install[0]: "$(id)"`},
		{"apt option", `{"name": "a", "steps": [{"apt_install": ["-oDpkg::Pre-Invoke::=id"]}]}`, "apt_install[0]:"},
		{"pip option", `{"name": "a", "steps": [{"pip_install": ["--index-url=http://evil/"]}]}`, "pip_install[0]:"},
		{"pip url", `{"name": "a", "steps": [{"pip_install": ["git+https://x/y"]}]}`, "pip_install[0]:"},
		{"pip backtick", "{\"name\": \"a\", \"steps\": [{\"pip_install\": [\"`id`\"]}]}", "pip_install[0]:"},
		{"pip newline", `{"name": "a", "steps": [{"pip_install": ["a\nb"]}]}`, "pip_install[0]:"},
		{"npm file", `{"name": "a", "steps": [{"npm_install": ["file:../x"]}]}`, "npm_install[0]:"},
		{"npm pipe", `{"name": "a", "steps": [{"npm_install": ["a|b"]}]}`, "npm_install[0]:"},
		{"copy src out", `{"name": "a", "steps": [{"copy": {"src": "../etc", "dest": "/x"}}]}`, "steps[0].copy.src:"},
		{"copy src abs", `{"name": "a", "steps": [{"copy": {"src": "/etc", "dest": "/x"}}]}`, "steps[0].copy.src:"},
		{"copy src dotdot inside", `{"name": "a", "steps": [{"copy": {"src": "a/../../b", "dest": "/x"}}]}`, "steps[0].copy.src:"},
		{"copy src empty", `{"name": "a", "steps": [{"copy": {"src": "", "dest": "/x"}}]}`, "steps[0].copy.src:"},
		{"copy dest relative", `{"name": "a", "steps": [{"copy": {"src": "a", "dest": "x"}}]}`, "steps[0].copy.dest:"},
		{"copy dest unclean", `{"name": "a", "steps": [{"copy": {"src": "a", "dest": "/x/../y"}}]}`, "steps[0].copy.dest:"},
		{"copy unknown", `{"name": "a", "steps": [{"copy": {"src": "a", "dest": "/x", "owner": "u"}}]}`, `unknown field "owner"`},
		{"copy mode", `{"name": "a", "steps": [{"copy": {"src": "a", "dest": "/x", "mode": "rwx"}}]}`, "steps[0].copy.mode:"},
		{"env empty", `{"name": "a", "steps": [{"env": {}}]}`, "steps[0].env: empty"},
		{"env bad name", `{"name": "a", "steps": [{"env": {"A-B": "1"}}]}`, `steps[0].env: bad name "A-B"`},
		{"env nul", `{"name": "a", "steps": [{"env": {"A": "x\u0000y"}}]}`, "steps[0].env.A: holds a NUL byte"},
		{"workdir relative", `{"name": "a", "steps": [{"workdir": "app"}]}`, "steps[0].workdir:"},
		{"start too long", `{"name": "a", "start_cmd": "` + strings.Repeat("x", MaxCommandBytes+1) + `"}`, "start_cmd: longer than"},
		{"run too long", `{"name": "a", "steps": [{"run": "` + strings.Repeat("x", MaxCommandBytes+1) + `"}]}`, "steps[0].run: longer than"},
		{"ready timeout", `{"name": "a", "ready_cmd": "true", "ready_timeout_seconds": 99999}`, "ready_timeout_seconds:"},
		{"ready timeout alone", `{"name": "a", "ready_timeout_seconds": 5}`, "ready_timeout_seconds: bounds the ready_cmd"},
		{"negative vcpus", `{"name": "a", "vcpus": -1}`, "vcpus: negative"},
		{"allow without internet", `{"name": "a", "network": {"allow": ["x.org"]}}`, "network.allow: an allow list needs internet: true"},
		{"bad allow", `{"name": "a", "network": {"internet": true, "allow": ["a b"]}}`, "network.allow[0]:"},
		{"too many steps", `{"name": "a", "steps": [` + strings.Repeat(`{"run": "x"},`, MaxSteps) + `{"run": "x"}]}`, "steps: 101 steps, at most 100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Decode([]byte(tc.body))
			if err == nil {
				t.Fatalf("Decode = %+v, want an error containing %q", s, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *build.Error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestCommandQuoting runs each step's command's package words through a
// real shell: every hostile name must arrive as one argument, unchanged,
// and run nothing.
func TestCommandQuoting(t *testing.T) {
	hostile := []string{"x; rm -rf /", "$(id)", "`id`", "a'b", `"q"`, "a\nb", "--opt", "*", "$HOME", "a\\b", "x && touch /tmp/pwned", ""}
	out, err := exec.Command("/bin/sh", "-c", `for a in `+QuoteArgv(hostile)+`; do printf '%s\0' "$a"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !reflect.DeepEqual(got, hostile) {
		t.Errorf("through sh: got %q, want %q", got, hostile)
	}
	for _, s := range []string{"git", "pandas==2.2.3", "@scope/pkg@1.0.0"} {
		if Quote(s) != s {
			t.Errorf("Quote(%q) = %q, want it bare", s, Quote(s))
		}
	}
}

func TestCommand(t *testing.T) {
	tests := []struct {
		step      Step
		cmd, user string
	}{
		{Step{AptInstall: []string{"git", "curl"}}, "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends git curl && rm -rf /var/lib/apt/lists/*", "root"},
		{Step{PipInstall: []string{"pandas==2.2.3", "a<2"}}, "python3 -m pip install --no-cache-dir pandas==2.2.3 'a<2'", "root"},
		{Step{NpmInstall: []string{"typescript"}, Global: true}, "npm install -g typescript", "root"},
		{Step{NpmInstall: []string{"left-pad@^1"}}, "npm install 'left-pad@^1'", ""},
		{Step{Run: "make", User: "user"}, "make", "user"},
		{Step{Run: "make"}, "make", ""},
		{Step{Workdir: "/a"}, "", ""},
	}
	for _, tc := range tests {
		cmd, user := tc.step.Command()
		if cmd != tc.cmd || user != tc.user {
			t.Errorf("%+v.Command() = %q, %q; want %q, %q", tc.step, cmd, user, tc.cmd, tc.user)
		}
		if cmd != "" {
			if out, err := exec.Command("/bin/sh", "-n", "-c", cmd).CombinedOutput(); err != nil {
				t.Errorf("sh -n refuses %q: %v %s", cmd, err, out)
			}
		}
	}
	if c, u := RunAs("id -un", "node"); c != "su -s /bin/sh node -c 'id -un'" || u != "root" {
		t.Errorf("RunAs(node) = %q, %q", c, u)
	}
	if c, u := RunAs("id", "user"); c != "id" || u != "user" {
		t.Errorf("RunAs(user) = %q, %q", c, u)
	}
}

// TestDockerfileOnReceipt: a Dockerfile whose names come from its base
// (not known when the spec is received) is not refused for them.
func TestDockerfileOnReceipt(t *testing.T) {
	for _, df := range []string{
		"FROM default\nWORKDIR $HOME\nUSER $APP_USER\nCOPY $SRC ${DEST:-/x}\n",
		"FROM python:3\nENV PATH=/opt/bin:$PATH\n",
	} {
		body, _ := json.Marshal(map[string]string{"name": "a", "dockerfile": df})
		if _, err := Decode(body); err != nil {
			t.Errorf("Decode(%q): %v", df, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	base := template.Defaults{Env: map[string]string{"PATH": "/bin", "A": "base"}, Workdir: "/workspace", User: "user", StartCmd: "base-start", VCPUs: 1}
	s := &Spec{Name: "a", Steps: []Step{
		{Env: map[string]string{"A": "1", "B": "2"}},
		{Run: "true"},
		{Workdir: "/srv"},
		{User: "root"},
		{Env: map[string]string{"A": "3"}},
		{User: "app"},
	}, ReadyCmd: "true", ReadyTimeoutSeconds: 9, MemoryMiB: 512}
	got := s.Defaults(base)
	want := template.Defaults{Env: map[string]string{"PATH": "/bin", "A": "3", "B": "2"}, Workdir: "/srv", User: "app", StartCmd: "base-start", ReadyCmd: "true", ReadyTimeoutSeconds: 9, VCPUs: 1, MemoryMiB: 512}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Defaults =\n %+v\nwant\n %+v", got, want)
	}
	if base.Env["A"] != "base" {
		t.Error("Defaults changed the base's env")
	}
	if d := (&Spec{Name: "a"}).Defaults(template.Defaults{}); d.Env != nil {
		t.Errorf("no env anywhere gave %v", d.Env)
	}
}
