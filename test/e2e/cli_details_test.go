package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// The CLI details of issue 9 through the binary, against a server named by
// WITHRUNTIME_BASE_URL (s.Env): --exec-timeout's 124, --internet, and
// extend, which never shortens a lease.
func TestCLIDetails(t *testing.T) {
	u := newUpstreams(t)
	s := testenv.StartServer(t, u.serverFlags()...)
	env := s.Env()
	small := []string{"--vcpus", "1", "--memory", "512"}
	sandboxArgs := func(verb string, rest ...string) []string {
		return append(append([]string{"sandbox", verb}, small...), rest...)
	}

	t.Run("--exec-timeout exits 124 and says so", func(t *testing.T) {
		out, errs, code := cli(t, env, sandboxArgs("run", "--exec-timeout", "2", "--", "sleep", "60")...)
		want := "withruntime: the command was killed by --exec-timeout after 2s\n"
		if code != 124 || errs != want || out != "" {
			t.Fatalf("got exit %d stdout %q stderr %q, want 124 and stderr %q", code, out, errs, want)
		}
	})

	t.Run("--internet reaches any host, --allow only its own", func(t *testing.T) {
		curl := []string{"--", "curl", "-sS", "--max-time", "20", "http://denied.example.test/"}
		mark := u.mark()
		out, errs, code := cli(t, env, sandboxArgs("run", append([]string{"--internet"}, curl...)...)...)
		if want := "hello from denied.example.test over http at " + upDenied + "\n"; code != 0 || out != want {
			log := s.Log.String()
			t.Fatalf("--internet: got exit %d stdout %q stderr %q, want 0 and %q\nserver log (end):\n%s",
				code, out, errs, want, log[max(0, len(log)-6000):])
		}
		if got := u.requestsSince(mark, at(upDenied)); len(got) != 1 {
			t.Fatalf("--internet: the upstream got %d requests, want 1", len(got))
		}

		mark = u.mark()
		_, errs, code = cli(t, env, sandboxArgs("run", append([]string{"--allow", "allowed.example.test"}, curl...)...)...)
		if code == 0 {
			t.Fatalf("--allow allowed.example.test: curl to denied.example.test exited 0 (stderr %q)", errs)
		}
		settle()
		if got := u.requestsSince(mark, at(upDenied)); len(got) != 0 {
			t.Fatalf("--allow allowed.example.test: denied.example.test got %d requests, want none", len(got))
		}

		out, errs, code = cli(t, env, sandboxArgs("create", "--internet", "--json")...)
		var sb api.Sandbox
		if code != 0 || json.Unmarshal([]byte(out), &sb) != nil {
			t.Fatalf("create --internet: got %q %q exit %d", out, errs, code)
		}
		defer cli(t, env, "sandbox", "rm", sb.ID)
		if !sb.Network.Internet || len(sb.Network.Allow) != 0 {
			t.Fatalf("create --internet: got network %+v, want the internet with no allow list", sb.Network)
		}
	})

	t.Run("extend never shortens the lease", func(t *testing.T) {
		out, errs, code := cli(t, env, sandboxArgs("create", "--timeout", "15m", "--json")...)
		var sb api.Sandbox
		if code != 0 || json.Unmarshal([]byte(out), &sb) != nil {
			t.Fatalf("create: got %q %q exit %d", out, errs, code)
		}
		defer cli(t, env, "sandbox", "rm", sb.ID)
		leaseEnd := func() time.Time {
			t.Helper()
			out, errs, code := cli(t, env, "sandbox", "get", sb.ID, "--json")
			var got api.Sandbox
			if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
				t.Fatalf("get: got %q %q exit %d", out, errs, code)
			}
			return got.LeaseEndsAt
		}
		first := leaseEnd()

		out, errs, code = cli(t, env, "sandbox", "extend", sb.ID, "--timeout", "30")
		if code != 0 || !strings.HasPrefix(out, sb.ID+"\tlease ends ") {
			t.Fatalf("extend --timeout 30: got %q %q exit %d", out, errs, code)
		}
		if got := leaseEnd(); !got.Equal(first) {
			t.Fatalf("after extend --timeout 30 of a 15m lease: the lease ends %v, want it kept at %v", got, first)
		}

		// The API, as the CLI calls it: 200 and the lease kept.
		status, body := call(t, s, s.Key, "POST", "/v1/sandboxes/"+sb.ID+"/extend", strings.NewReader(`{"timeout_seconds":30}`))
		var viaAPI api.Sandbox
		if status != 200 || json.Unmarshal(body, &viaAPI) != nil || !viaAPI.LeaseEndsAt.Equal(first) {
			t.Fatalf("POST extend 30: got %d %s, want 200 and lease_ends_at %v", status, body, first)
		}

		out, errs, code = cli(t, env, "sandbox", "extend", sb.ID, "--timeout", "1h", "--json")
		var longer api.Sandbox
		if code != 0 || json.Unmarshal([]byte(out), &longer) != nil {
			t.Fatalf("extend --timeout 1h: got %q %q exit %d", out, errs, code)
		}
		// 1h from now is at least 45 minutes past a 15 minute lease made
		// before now.
		if !longer.LeaseEndsAt.After(first.Add(45*time.Minute)) || !leaseEnd().Equal(longer.LeaseEndsAt) {
			t.Fatalf("extend --timeout 1h: the lease ends %v, want more than 45m after %v", longer.LeaseEndsAt, first)
		}

		out, errs, code = cli(t, env, "sandbox", "exec", sb.ID, "--exec-timeout", "1", "--", "sleep", "30")
		if want := "withruntime: the command was killed by --exec-timeout after 1s\n"; code != 124 || errs != want {
			t.Fatalf("exec --exec-timeout 1: got exit %d stdout %q stderr %q, want 124 and %q", code, out, errs, want)
		}
		if out, _, code := cli(t, env, "sandbox", "exec", sb.ID, "--", "echo", "alive"); code != 0 || out != "alive\n" {
			t.Fatalf("after the timeout the sandbox should still run: got %q exit %d", out, code)
		}
	})
}
