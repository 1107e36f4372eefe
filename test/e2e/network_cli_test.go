package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestNetworkCLI is issue 29's network items through the binary, on one
// server started with --sandbox-ca (the upstreams' test CA, which signs
// their certificates): a command that fails on the network of a sandbox
// whose network is off gets one line saying so; "sandbox network ID"
// shows and changes a live sandbox's policy, which the API then reports
// and the sandbox then meets; and every sandbox trusts the extra CA (curl,
// Python, Node) without being able to change what it trusts.
func TestNetworkCLI(t *testing.T) {
	u := newUpstreams(t)
	s := testenv.StartServer(t, append(u.serverFlags(), "--sandbox-ca", u.CAFile)...)
	env := s.Env()

	out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "512", "--json")
	var sb api.Sandbox
	if code != 0 || json.Unmarshal([]byte(out), &sb) != nil {
		t.Fatalf("create: got %q %q exit %d", out, errs, code)
	}
	id := sb.ID
	t.Cleanup(func() { cli(t, env, "sandbox", "rm", id) })

	// apiNetwork is the policy as the API reports it.
	apiNetwork := func() api.Network {
		t.Helper()
		status, body := call(t, s, s.Key, "GET", "/v1/sandboxes/"+id+"/network", nil)
		var n api.Network
		if status != 200 || json.Unmarshal(body, &n) != nil {
			t.Fatalf("GET network: %d %s", status, body)
		}
		return n
	}
	network := func(want string, flags ...string) {
		t.Helper()
		out, errs, code := cli(t, env, append([]string{"sandbox", "network", id}, flags...)...)
		if code != 0 || out != want {
			t.Fatalf("sandbox network %v: got %q %q exit %d, want %q", flags, out, errs, code, want)
		}
	}
	curl := func(url string) (string, string, int) {
		return cli(t, env, "sandbox", "exec", id, "--", "curl", "-sS", "--max-time", "20", url)
	}
	hint := "withruntime: the sandbox's network is off; turn it on with: withruntime sandbox network " + id + " --internet (or --allow HOST)\n"

	t.Run("off: a failed lookup says the network is off, once", func(t *testing.T) {
		network("off\n")
		mark := u.mark()
		out, errs, code := curl("https://allowed.example.test/")
		if code == 0 || !strings.Contains(errs, "Could not resolve host") {
			t.Fatalf("curl with the network off: got %q %q exit %d, want a failed lookup", out, errs, code)
		}
		if strings.Count(errs, "network is off") != 1 || !strings.HasSuffix(errs, hint) {
			t.Fatalf("curl with the network off: got stderr %q, want it to end with %q, once", errs, hint)
		}
		settle()
		if got := u.requestsSince(mark, nil); len(got) != 0 {
			t.Fatalf("with the network off the upstreams got %d requests", len(got))
		}
		// Nothing reached the proxy, so the log is empty, and says why.
		out, errs, code = cli(t, env, "sandbox", "egress", id)
		if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(errs, "the sandbox's network is off: the host drops all it sends before the egress proxy") {
			t.Fatalf("sandbox egress with the network off: got %q %q exit %d, want the header alone and a note on stderr", out, errs, code)
		}
		// A failure that is not the network's gets no hint.
		if _, errs, code := cli(t, env, "sandbox", "exec", id, "--", "sh", "-c", "echo oops >&2; exit 3"); code != 3 || errs != "oops\n" {
			t.Fatalf("another failure: got stderr %q exit %d, want only the command's", errs, code)
		}
		// run's sandbox ends with the command: its hint is run's flag.
		_, errs, code = cli(t, env, "sandbox", "run", "--vcpus", "1", "--memory", "512", "--",
			"curl", "-sS", "--max-time", "20", "http://allowed.example.test/")
		if want := "withruntime: the sandbox's network is off; run it with --internet (or --allow HOST)\n"; code == 0 || !strings.HasSuffix(errs, want) {
			t.Fatalf("run with the network off: got stderr %q exit %d, want it to end with %q", errs, code, want)
		}
	})

	t.Run("--allow, --internet and --off change what the sandbox reaches", func(t *testing.T) {
		network("internet, only allowed.example.test\n", "--allow", "allowed.example.test")
		if n := apiNetwork(); !n.Internet || len(n.Allow) != 1 || n.Allow[0] != "allowed.example.test" {
			t.Fatalf("after --allow the API reports %+v", n)
		}
		// HTTPS to a host whose certificate the --sandbox-ca signed: no -k,
		// no --cacert.
		mark := u.mark()
		if out, errs, code := curl("https://allowed.example.test/"); code != 0 || out != "hello from allowed.example.test over https at "+upAllowed+"\n" {
			t.Fatalf("--allow: curl https://allowed.example.test/ got %q %q exit %d", out, errs, code)
		}
		if out, errs, code := curl("http://denied.example.test/"); code == 0 || strings.Contains(errs, "network is off") {
			t.Fatalf("--allow: curl to denied.example.test got %q %q exit %d, want a failure and no off hint", out, errs, code)
		}
		settle()
		if got := u.requestsSince(mark, at(upDenied)); len(got) != 0 {
			t.Fatalf("--allow allowed.example.test: denied.example.test got %d requests", len(got))
		}
		// Online, the proxy logs both: the CLI shows them, with no note.
		out, errs, code := cli(t, env, "sandbox", "egress", id)
		if code != 0 || errs != "" || !strings.Contains(out, "allowed.example.test") || !strings.Contains(out, "denied.example.test") {
			t.Fatalf("sandbox egress after --allow: got %q %q exit %d", out, errs, code)
		}

		network("internet\n", "--internet")
		if n := apiNetwork(); !n.Internet || len(n.Allow) != 0 {
			t.Fatalf("after --internet the API reports %+v", n)
		}
		if out, errs, code := curl("http://denied.example.test/"); code != 0 || out != "hello from denied.example.test over http at "+upDenied+"\n" {
			t.Fatalf("--internet: curl to denied.example.test got %q %q exit %d", out, errs, code)
		}

		out, errs, code = cli(t, env, "sandbox", "network", id, "--off", "--json")
		var n api.Network
		if code != 0 || json.Unmarshal([]byte(out), &n) != nil || n.Internet {
			t.Fatalf("--off --json: got %q %q exit %d", out, errs, code)
		}
		if n := apiNetwork(); n.Internet || len(n.Allow) != 0 {
			t.Fatalf("after --off the API reports %+v", n)
		}
		mark = u.mark()
		if out, errs, code := curl("http://denied.example.test/"); code == 0 || !strings.HasSuffix(errs, hint) {
			t.Fatalf("after --off: curl got %q %q exit %d, want a failure and the hint", out, errs, code)
		}
		settle()
		if got := u.requestsSince(mark, nil); len(got) != 0 {
			t.Fatalf("after --off the upstreams got %d requests", len(got))
		}
	})

	t.Run("--sandbox-ca is in every sandbox's trust, which the sandbox cannot change", func(t *testing.T) {
		network("internet, only allowed.example.test\n", "--allow", "allowed.example.test")
		// Python's default context reads the system bundle.
		py := `import ssl; print(sorted(dict(x[0] for x in c["subject"])["commonName"] for c in ssl.create_default_context().get_ca_certs() if "e2e" in str(c["subject"])))`
		if out, errs, code := cli(t, env, "sandbox", "exec", id, "--", "python3", "-c", py); code != 0 || out != "['withruntime e2e test CA']\n" {
			t.Fatalf("python's default trust: got %q %q exit %d, want the test CA in it", out, errs, code)
		}
		// Node reads NODE_EXTRA_CA_CERTS, not the bundle.
		node := `require("https").get("https://allowed.example.test/", r => { r.pipe(process.stdout) }).on("error", e => { console.error(e.message); process.exit(1) })`
		if out, errs, code := cli(t, env, "sandbox", "exec", id, "--", "node", "-e", node); code != 0 || out != "hello from allowed.example.test over https at "+upAllowed+"\n" {
			t.Fatalf("node https: got %q %q exit %d", out, errs, code)
		}
		// Root in the sandbox cannot write the bundle; the host's copy is
		// the one every sandbox mounts, so it must stay as it was.
		bundle := filepath.Join(s.DataDir, "ca", "bundle.pem")
		before, err := os.ReadFile(bundle)
		if err != nil || !bytes.Contains(before, bytes.TrimSpace(u.CAPEM)) {
			t.Fatalf("the host's bundle %s: %v, want the test CA in it", bundle, err)
		}
		for _, target := range []string{"/etc/ssl/certs/ca-certificates.crt", "/usr/local/share/ca-certificates/withruntime.crt"} {
			_, errs, code := cli(t, env, "sandbox", "exec", id, "--user", "root", "--", "sh", "-c", "echo tampered >> "+target)
			if code == 0 {
				t.Errorf("root appended to %s (stderr %q), want a read-only file", target, errs)
			}
		}
		if after, _ := os.ReadFile(bundle); !bytes.Equal(after, before) {
			t.Fatalf("the host's bundle changed after root in a sandbox wrote to it")
		}
		other, errs, code := cli(t, env, "sandbox", "run", "--vcpus", "1", "--memory", "512", "--", "grep", "-c", "tampered", "/etc/ssl/certs/ca-certificates.crt")
		if code != 1 || other != "0\n" {
			t.Fatalf("another sandbox's bundle: grep tampered got %q %q exit %d, want no match", other, errs, code)
		}
	})
}

// TestServeSandboxCARefusesBadFile: a --sandbox-ca that is no PEM
// certificate stops serve before it starts anything.
func TestServeSandboxCARefusesBadFile(t *testing.T) {
	testenv.RequiresGvisor(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(bad, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.CLI(t), "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--sandbox-ca", bad)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("serve --sandbox-ca with a key: got %v (stderr %q), want exit 2", err, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "--sandbox-ca") || !strings.Contains(msg, "PRIVATE KEY") {
		t.Fatalf("got stderr %q, want it to name --sandbox-ca and the private key", msg)
	}
}
