package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// The E2B tests of sdk/python run against a server the pytest session
// starts with no egress flags, on a host whose upstreams they cannot
// make; this test has the upstream namespace (egress_rig_test.go) and
// starts its own server with --e2b-listen beside the rig's flags, then
// drives E2B's own Python client, unmodified, as a subprocess.

// e2bPython is the interpreter of the test environment scripts/pyenv.sh
// makes (it has the pinned e2b package): WITHRUNTIME_PYENV, as for the
// script, or its default.
func e2bPython(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("WITHRUNTIME_PYENV")
	if dir == "" {
		dir = "/var/cache/withruntime/pyenv"
	}
	py := filepath.Join(dir, "bin", "python")
	if err := exec.Command(py, "-c", "import e2b").Run(); err != nil {
		why := py + " cannot import e2b (run scripts/pyenv.sh): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have this: %s", why)
		}
		t.Skip(why)
	}
	return py
}

// e2bScript creates one sandbox with E2B's client from the create
// arguments (JSON), writes the files with files.write, runs each shell
// command with commands.run, kills the sandbox and prints the id and
// every command's exit code and output.
const e2bScript = `
import json, sys
import e2b
spec = json.loads(sys.argv[1])
sbx = e2b.Sandbox.create(timeout=300, **spec["create"])
out = {"id": sbx.sandbox_id, "runs": []}
try:
    for path, data in spec["files"].items():
        sbx.files.write(path, data)
    for cmd in spec["cmds"]:
        try:
            r = sbx.commands.run(cmd, timeout=60)
            out["runs"].append({"exit": r.exit_code, "stdout": r.stdout, "stderr": r.stderr})
        except e2b.CommandExitException as e:
            out["runs"].append({"exit": e.exit_code, "stdout": e.stdout, "stderr": e.stderr})
finally:
    out["killed"] = sbx.kill()
print(json.dumps(out))
`

type e2bRun struct {
	Exit           int
	Stdout, Stderr string
}

type e2bAnswer struct {
	ID     string
	Runs   []e2bRun
	Killed bool
}

// e2bSandbox runs e2bScript against the server's E2B address, with the
// test CA in /tmp/test-ca.pem (for upstreams the proxy passes TLS through
// to).
func e2bSandbox(t *testing.T, py string, s *testenv.Server, e2bURL string, u *upstreams, create map[string]any, cmds ...string) e2bAnswer {
	t.Helper()
	files := map[string]string{"/tmp/test-ca.pem": string(u.CAPEM)}
	spec, _ := json.Marshal(map[string]any{"create": create, "files": files, "cmds": cmds})
	cmd := exec.Command(py, "-c", e2bScript, string(spec))
	cmd.Env = append(os.Environ(), "E2B_API_URL="+e2bURL, "E2B_SANDBOX_URL="+e2bURL, "E2B_API_KEY="+s.Key)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("the e2b client: %v\nstdout %s\nstderr %s", err, out.String(), errb.String())
	}
	var a e2bAnswer
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || len(a.Runs) != len(cmds) || !a.Killed {
		t.Fatalf("the e2b client answered %q (%v); stderr %s", out.String(), err, errb.String())
	}
	return a
}

// expectReached checks that the first commands got the answers that
// start with want, in order, and that none of the others up to command
// upTo (excluded) reached an upstream.
func (a e2bAnswer) expectReached(t *testing.T, upTo int, want ...string) {
	t.Helper()
	for i, w := range want {
		if got := a.Runs[i]; got.Exit != 0 || !strings.HasPrefix(got.Stdout, w) {
			t.Errorf("command %d in the E2B sandbox: %+v, want %q", i, got, w)
		}
	}
	for i := len(want); i < upTo; i++ {
		if a.Runs[i].Exit == 0 && strings.Contains(a.Runs[i].Stdout, "hello from") {
			t.Errorf("command %d reached what allow_out does not allow: %+v", i, a.Runs[i])
		}
	}
}

const e2bCurl = "curl -sS --connect-timeout 5 -m 15 "

// TestE2BEgressAndSecrets: a sandbox created through the E2B API, by
// E2B's unmodified client, is under withruntime's egress policy and gets
// withruntime's host-bound secrets as placeholders swapped in by the
// egress proxy.
func TestE2BEgressAndSecrets(t *testing.T) {
	u := newUpstreams(t)
	py := e2bPython(t)
	e2bAddr := testenv.FreeAddr(t)
	s := testenv.StartServer(t, append(u.serverFlags(), "--e2b-listen", e2bAddr)...)
	e2bURL := "http://" + e2bAddr
	r := &recorder{s: s}

	value := newSecretValue()
	if out, errs, code := r.cli(t, value, "secrets", "set", "OPENAI_API_KEY", "--host", "api.openai.test"); code != 0 {
		t.Fatalf("secrets set: exit %d %q %q", code, out, errs)
	}

	t.Run("allow_out names with deny_out 0.0.0.0/0: the names only; a secret swapped in on HTTPS to its host", func(t *testing.T) {
		m := u.mark()
		a := e2bSandbox(t, py, s, e2bURL, u, map[string]any{
			"metadata": map[string]string{"test": "e2b-egress"},
			"network":  map[string]any{"allow_out": []string{"allowed.example.test", "api.openai.test"}, "deny_out": []string{"0.0.0.0/0"}},
		},
			e2bCurl+"--cacert /tmp/test-ca.pem https://allowed.example.test/",
			e2bCurl+"http://allowed.example.test/",
			e2bCurl+"--cacert /tmp/test-ca.pem https://denied.example.test/",
			e2bCurl+"http://denied.example.test/",
			e2bCurl+"http://"+upDenied+"/",
			`printf %s "$OPENAI_API_KEY"`,
			e2bCurl+`-D - -H "Authorization: Bearer $OPENAI_API_KEY" https://api.openai.test/echo`,
			e2bCurl+`-H "Authorization: Bearer $OPENAI_API_KEY" http://api.openai.test/echo`,
		)
		a.expectReached(t, 5, "hello from allowed.example.test over https", "hello from allowed.example.test over http")
		settle()
		if got := u.requestsSince(m, at(upAllowed)); len(got) != 2 {
			t.Errorf("allowed.example.test got %d requests, want 2: %+v", len(got), got)
		}
		if got := u.arrivalsSince(m, "", upDenied); len(got) != 0 {
			t.Errorf("denied.example.test was reached: %+v", got)
		}
		if got := u.requestsSince(m, at(upDenied)); len(got) != 0 {
			t.Errorf("denied.example.test got requests: %+v", got)
		}

		// The secret: a placeholder in the sandbox; the value only at the
		// bound host, over HTTPS.
		ph := a.Runs[5].Stdout
		if !strings.HasPrefix(ph, "wrsec_") || strings.Contains(ph, value) {
			t.Fatalf("the E2B sandbox's OPENAI_API_KEY is %q, want a placeholder", ph)
		}
		var auths []string
		for _, q := range u.requestsSince(m, at(upOpenAI)) {
			auths = append(auths, q.Scheme+" "+q.Header.Get("Authorization"))
		}
		// Over plain HTTP the proxy swaps nothing: the upstream sees the
		// placeholder, never the value.
		if want := []string{"https Bearer " + value, "http Bearer " + ph}; strings.Join(auths, "|") != strings.Join(want, "|") {
			t.Errorf("api.openai.test got Authorization %q, want %q", auths, want)
		}
		// The echo comes back into the sandbox with the placeholder.
		if echo := a.Runs[6]; echo.Exit != 0 || !strings.Contains(echo.Stdout, "authorization=Bearer "+ph+"\n") {
			t.Errorf("the echo the E2B sandbox saw: %+v", echo)
		}
		for i, run := range a.Runs {
			if strings.Contains(run.Stdout+run.Stderr, value) {
				t.Errorf("command %d in the E2B sandbox saw the secret's value: %+v", i, run)
			}
		}
		// Through withruntime's API: the same sandbox, with the policy the
		// E2B options made, and its log says what it refused.
		var sb struct {
			Network struct {
				Internet bool
				Allow    []string
			}
		}
		st, data := r.call(t, "GET", "/v1/sandboxes/"+a.ID, nil)
		if st != 200 || json.Unmarshal(data, &sb) != nil || !sb.Network.Internet ||
			strings.Join(sb.Network.Allow, ",") != "allowed.example.test,api.openai.test" {
			t.Errorf("the sandbox through withruntime's API: %d %s", st, data)
		}
		(&box{r: r, ID: a.ID}).expectEvent(t, 0, "denied.example.test", "refused", "name not allowed")
	})

	t.Run("allow_out an address and a CIDR with deny_out 0.0.0.0/0: the addresses they cover, by literal or by name", func(t *testing.T) {
		m := u.mark()
		// 198.18.77.0/30 covers upAllowed (.2) and upWild (.3), not upDenied.
		a := e2bSandbox(t, py, s, e2bURL, u, map[string]any{
			"network": map[string]any{"allow_out": []string{upAllowed, "198.18.77.0/30"}, "deny_out": []string{"0.0.0.0/0"}},
		},
			e2bCurl+"http://"+upAllowed+"/",
			e2bCurl+"http://a.wild.example.test/",
			e2bCurl+"http://"+upDenied+"/",
			e2bCurl+"http://denied.example.test/",
		)
		a.expectReached(t, 4, "hello from "+upAllowed+" over http", "hello from a.wild.example.test over http")
		settle()
		if got := u.arrivalsSince(m, "", upDenied); len(got) != 0 {
			t.Errorf("upDenied was reached: %+v", got)
		}
		st, data := r.call(t, "GET", "/v1/sandboxes/"+a.ID, nil)
		if st != 200 || !bytes.Contains(data, []byte(`"allow":["`+upAllowed+`","198.18.77.0/30"]`)) {
			t.Errorf("the sandbox through withruntime's API: %d %s", st, data)
		}
	})

	t.Run("allow_internet_access=False: nothing at all", func(t *testing.T) {
		m := u.mark()
		a := e2bSandbox(t, py, s, e2bURL, u, map[string]any{"allow_internet_access": false},
			e2bCurl+"--cacert /tmp/test-ca.pem https://allowed.example.test/",
			e2bCurl+"http://allowed.example.test/",
			e2bCurl+"http://"+upAllowed+"/",
			e2bCurl+"https://api.openai.test/",
		)
		for i, run := range a.Runs {
			if run.Exit == 0 || strings.Contains(run.Stdout, "hello from") {
				t.Errorf("command %d reached out with no internet access: %+v", i, run)
			}
		}
		settle()
		if got := u.arrivalsSince(m, "", ""); len(got) != 0 {
			t.Errorf("an upstream was reached: %+v", got)
		}
		if got := u.requestsSince(m, nil); len(got) != 0 {
			t.Errorf("an upstream got requests: %+v", got)
		}
		st, data := r.call(t, "GET", "/v1/sandboxes/"+a.ID, nil)
		if st != 200 || !bytes.Contains(data, []byte(`"internet":false`)) {
			t.Errorf("the sandbox through withruntime's API: %d %s", st, data)
		}
	})
}
