package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// newKey makes a key through the API and returns its secret.
func newKey(t *testing.T, s *testenv.Server, body string) api.Key {
	t.Helper()
	st, data := call(t, s, s.Key, "POST", "/v1/keys", strings.NewReader(body))
	var k api.Key
	if st != 201 || json.Unmarshal(data, &k) != nil || k.Secret == "" {
		t.Fatalf("creating key %s: %d %s", body, st, data)
	}
	return k
}

func newAccount(t *testing.T, s *testenv.Server, body string) {
	t.Helper()
	if st, data := call(t, s, s.Key, "POST", "/v1/accounts", strings.NewReader(body)); st != 201 {
		t.Fatalf("creating account %s: %d %s", body, st, data)
	}
}

// waitEnded polls until the sandbox ends and returns it.
func waitEnded(t *testing.T, c sbx, id string, limit time.Duration) api.Sandbox {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		sb := c.get(id)
		if sb.State == "ended" {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s still %s after %s", id, sb.State, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestAccountsAndKeys(t *testing.T) {
	s := testenv.StartServer(t)
	newAccount(t, s, `{"name":"acme","concurrency":1}`)
	newAccount(t, s, `{"name":"other"}`)
	full := newKey(t, s, `{"account":"acme"}`)
	ro := newKey(t, s, `{"account":"acme","kind":"read_only"}`)
	stranger := newKey(t, s, `{"account":"other"}`)
	acme := sbx{t, s, full.Secret}

	status, sb, code := acme.create(`{"vcpus":1,"memory_mib":512}`)
	if status != 201 {
		t.Fatalf("create with a full key: %d %s", status, code)
	}
	base := "/v1/sandboxes/" + sb.ID

	t.Run("read-only keys read and change nothing", func(t *testing.T) {
		mutating := []struct{ method, path, body string }{
			{"POST", "/v1/sandboxes", `{}`},
			{"DELETE", base, ""},
			{"POST", base + "/stop", ""},
			{"POST", base + "/extend", `{"timeout_seconds":60}`},
			{"POST", base + "/pause", ""},
			{"POST", base + "/resume", ""},
			{"POST", base + "/exec", `{"cmd":["true"]}`},
			{"POST", base + "/processes/1/kill", ""},
			{"PUT", base + "/files?path=x", "data"},
			{"DELETE", base + "/files?path=x", ""},
			{"POST", base + "/files/mkdir?path=d", ""},
			{"PUT", base + "/archive?path=d", ""},
			{"POST", "/v1/keys", `{}`},
			{"DELETE", "/v1/keys/" + full.ID, ""},
			{"POST", "/v1/accounts", `{"name":"x"}`},
		}
		for _, m := range mutating {
			var body *strings.Reader
			if m.body != "" {
				body = strings.NewReader(m.body)
			}
			var st int
			var data []byte
			if body != nil {
				st, data = call(t, s, ro.Secret, m.method, m.path, body)
			} else {
				st, data = call(t, s, ro.Secret, m.method, m.path, nil)
			}
			if st != 403 || errorCode(data) != "forbidden" {
				t.Errorf("%s %s with a read-only key: got %d %s, want 403 forbidden", m.method, m.path, st, data)
			}
		}
		for _, path := range []string{base, "/v1/sandboxes", base + "/files/list?path=/workspace", base + "/processes", "/v1/usage", "/v1/keys"} {
			if st, data := call(t, s, ro.Secret, "GET", path, nil); st != 200 {
				t.Errorf("GET %s with a read-only key: got %d %s, want 200", path, st, data)
			}
		}
		if got := acme.get(sb.ID); got.State != "running" {
			t.Fatalf("the sandbox changed under read-only calls: %s", got.State)
		}
	})

	t.Run("another account's sandbox is not found", func(t *testing.T) {
		for _, m := range []struct{ method, path string }{
			{"GET", base}, {"DELETE", base}, {"POST", base + "/exec"}, {"GET", base + "/files?path=/etc/hostname"},
		} {
			var st int
			var data []byte
			if m.method == "POST" {
				st, data = call(t, s, stranger.Secret, m.method, m.path, strings.NewReader(`{"cmd":["true"]}`))
			} else {
				st, data = call(t, s, stranger.Secret, m.method, m.path, nil)
			}
			if st != 404 || errorCode(data) != "not_found" {
				t.Errorf("%s %s with another account's key: got %d %s, want 404", m.method, m.path, st, data)
			}
		}
		_, data := call(t, s, stranger.Secret, "GET", "/v1/sandboxes", nil)
		if strings.Contains(string(data), sb.ID) {
			t.Errorf("another account's list shows %s", sb.ID)
		}
	})

	t.Run("concurrency counts running sandboxes, not paused ones", func(t *testing.T) {
		status, _, code := acme.create(`{"vcpus":1,"memory_mib":512}`)
		if status != 429 || code != "concurrency_limit_reached" {
			t.Fatalf("second sandbox of a concurrency-1 account: got %d %s, want 429 concurrency_limit_reached", status, code)
		}
		if st, data := call(t, s, full.Secret, "POST", base+"/pause", nil); st != 200 {
			t.Fatalf("pause: %d %s", st, data)
		}
		if status, _, code := acme.create(`{"vcpus":1,"memory_mib":512}`); status != 201 {
			t.Fatalf("with the first paused: got %d %s, want 201", status, code)
		}
	})

	t.Run("revoked keys stop working", func(t *testing.T) {
		if st, data := call(t, s, s.Key, "DELETE", "/v1/keys/"+ro.ID, nil); st != 204 {
			t.Fatalf("delete key: %d %s", st, data)
		}
		if st, _ := call(t, s, ro.Secret, "GET", "/v1/sandboxes", nil); st != 401 {
			t.Fatalf("a revoked key: got %d, want 401", st)
		}
	})

	t.Run("keys create on the CLI prints the new key", func(t *testing.T) {
		out, errs, code := cli(t, s.Env(), "keys", "create", "--account", "acme", "--read-only", "--json")
		var k api.Key
		if code != 0 || json.Unmarshal([]byte(out), &k) != nil || !strings.HasPrefix(k.Secret, "wr_") || k.Kind != "read_only" {
			t.Fatalf("keys create --json: got %q %q exit %d", out, errs, code)
		}
		out, _, _ = cli(t, s.Env(), "keys", "ls")
		if !strings.Contains(out, k.ID) || strings.Contains(out, k.Secret) {
			t.Fatalf("keys ls: got %q, want the id and never the secret", out)
		}
	})
}

func TestDailySpendingLimit(t *testing.T) {
	s := testenv.StartServer(t)
	// 100 micros a day: a busy default-size sandbox (80000 micros an hour)
	// crosses it in about 5 seconds.
	k := newKey(t, s, `{"daily_limit_micros":100}`)
	c := sbx{t, s, k.Secret}
	status, sb, code := c.create(`{}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, code)
	}
	c.exec(sb.ID, "for i in 1 2; do (while :; do :; done) & done; wait", true)
	end := waitEnded(t, c, sb.ID, 30*time.Second)
	if end.EndReason != "spending_limit" {
		t.Fatalf("got end reason %q, want spending_limit", end.EndReason)
	}
	if end.CostMicros < 100 || end.CostMicros > 130 {
		t.Errorf("the sandbox cost %d micros against a limit of 100", end.CostMicros)
	}
	status, _, code = c.create(`{"vcpus":1,"memory_mib":512}`)
	if status != 402 || code != "spending_limit_reached" {
		t.Fatalf("create past the limit: got %d %s, want 402 spending_limit_reached", status, code)
	}
	env := append(os.Environ(), "WITHRUNTIME_BASE_URL="+s.URL, "WITHRUNTIME_API_KEY="+k.Secret)
	_, errs, exit := cli(t, env, "sandbox", "run", "--vcpus", "1", "--memory", "512", "--", "true")
	if exit != 125 || !strings.HasPrefix(errs, "error: spending_limit_reached: ") {
		t.Fatalf("sandbox run past the limit: got exit %d %q", exit, errs)
	}
	// Refusals made nothing and cost nothing.
	_, data := call(t, s, s.Key, "GET", "/v1/sandboxes", nil)
	var list api.SandboxList
	json.Unmarshal(data, &list)
	if len(list.Sandboxes) != 1 {
		t.Fatalf("got %d sandboxes, want only the first", len(list.Sandboxes))
	}
	_, data = call(t, s, s.Key, "GET", "/v1/usage?key="+k.ID, nil)
	var u api.Usage
	json.Unmarshal(data, &u)
	if u.CostMicros != end.CostMicros {
		t.Fatalf("the key's usage is %d micros, its one sandbox cost %d", u.CostMicros, end.CostMicros)
	}
}

func TestTrial(t *testing.T) {
	// 0.002 hours: 7.2 seconds of the default size's time (a 512 MiB
	// sandbox's hours count an eighth: a minute of it).
	s := testenv.StartServer(t, "--allow-trial", "--trial-hours", "0.002", "--trial-per-address", "2")
	st, data := call(t, s, "", "POST", "/v1/trial", nil)
	var trial api.Trial
	if st != 201 || json.Unmarshal(data, &trial) != nil || trial.Key == "" {
		t.Fatalf("trial: %d %s", st, data)
	}
	c := sbx{t, s, trial.Key}
	if status, _, code := c.create(`{"vcpus":4}`); status != 403 || code != "forbidden" {
		t.Fatalf("a trial's create past its size: got %d %s, want 403 forbidden", status, code)
	}
	_, sb, code := c.create(`{"vcpus":2,"memory_mib":4096}`)
	if sb.ID == "" {
		t.Fatalf("create with a trial key: %s", code)
	}
	end := waitEnded(t, c, sb.ID, 30*time.Second)
	if end.EndReason != "spending_limit" {
		t.Fatalf("a trial past its hours: got end reason %q, want spending_limit", end.EndReason)
	}
	status, _, code := c.create(`{"vcpus":1,"memory_mib":512}`)
	if status != 402 || code != "trial_exhausted" {
		t.Fatalf("create after the trial hours: got %d %s, want 402 trial_exhausted", status, code)
	}
	// The CLI obtains its own trial key and keeps it.
	cfg := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + cfg, "WITHRUNTIME_BASE_URL=" + s.URL}
	out, errs, exit := cli(t, env, "sandbox", "run", "--trial", "--vcpus", "1", "--memory", "512", "--", "python3", "-c", "print(6 * 7)")
	if out != "42\n" || exit != 0 {
		t.Fatalf("sandbox run --trial: got %q %q exit %d", out, errs, exit)
	}
	saved, err := os.ReadFile(filepath.Join(cfg, "withruntime", "config.json"))
	if err != nil || !strings.Contains(string(saved), "wr_") {
		t.Fatalf("the trial key was not kept: %q %v", saved, err)
	}
	// Two trials per address: the third is refused.
	if st, data := call(t, s, "", "POST", "/v1/trial", nil); st != 429 || errorCode(data) != "rate_limited" {
		t.Fatalf("a third trial from one address: got %d %s, want 429 rate_limited", st, data)
	}
}
