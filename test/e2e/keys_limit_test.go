package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// mint asks for a key with the key secret and returns the status, the key
// made and the error code.
func mint(t *testing.T, s *testenv.Server, secret, body string) (int, api.Key, string) {
	t.Helper()
	st, data := call(t, s, secret, "POST", "/v1/keys", strings.NewReader(body))
	var k api.Key
	json.Unmarshal(data, &k)
	return st, k, errorCode(data)
}

// spendAll runs a sandbox of key with both CPUs busy until the server ends
// it, and returns it ended.
func spendAll(t *testing.T, s *testenv.Server, key string) api.Sandbox {
	t.Helper()
	c := sbx{t, s, key}
	status, sb, code := c.create(`{}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, code)
	}
	c.exec(sb.ID, "for i in 1 2; do (while :; do :; done) & done; wait", true)
	return waitEnded(t, c, sb.ID, 90*time.Second)
}

// TestKeysCannotMintPastTheirLimit is issue 8's attack: a key past its
// daily limit mints a key without one and keeps spending. Keys made by a
// key answer to it: their limit is at most its own, and what they spend
// counts against every limit above them, at create and mid-lease.
func TestKeysCannotMintPastTheirLimit(t *testing.T) {
	s := testenv.StartServer(t)
	newAccount(t, s, `{"name":"acme"}`)
	newAccount(t, s, `{"name":"other"}`)
	// 100 micros a day: a busy default-size sandbox (about 22 micros a
	// second) crosses it in about 5 seconds.
	top := newKey(t, s, `{"account":"acme","daily_limit_micros":100}`)

	minted := func(secret, body string, wantParent string, wantLimit int64) api.Key {
		t.Helper()
		st, k, code := mint(t, s, secret, body)
		if st != 201 || k.Parent != wantParent || k.DailyLimitMicros != wantLimit || k.Account != "acme" {
			t.Fatalf("mint %s: got %d %s %+v, want 201 with parent %s and limit %d", body, st, code, k, wantParent, wantLimit)
		}
		return k
	}
	refused := func(secret, body string) {
		t.Helper()
		if st, k, code := mint(t, s, secret, body); st != 403 || code != "forbidden" {
			t.Errorf("mint %s: got %d %s %+v, want 403 forbidden", body, st, code, k)
		}
	}
	child := minted(top.Secret, `{"daily_limit_micros":50}`, top.ID, 50)
	sibling := minted(top.Secret, `{"kind":"full"}`, top.ID, 100) // no limit asked: the parent's
	grandchild := minted(child.Secret, `{}`, child.ID, 50)
	ro := minted(top.Secret, `{"kind":"read_only"}`, top.ID, 100)
	refused(top.Secret, `{"daily_limit_micros":1000}`)
	refused(top.Secret, `{"kind":"admin"}`)
	refused(child.Secret, `{"daily_limit_micros":100}`) // above its parent, within the grandparent
	refused(ro.Secret, `{}`)
	refused(ro.Secret, `{"kind":"read_only"}`)

	t.Run("another account is one answer", func(t *testing.T) {
		for _, req := range []struct{ method, path, body string }{
			{"POST", "/v1/keys", `{"account":"NAME"}`},
			{"GET", "/v1/keys?account=NAME", ""},
			{"GET", "/v1/usage?account=NAME", ""},
		} {
			var answers []string
			for _, name := range []string{"other", "nosuchaccount"} {
				var st int
				var data []byte
				if req.body != "" {
					st, data = call(t, s, top.Secret, req.method, req.path, strings.NewReader(strings.ReplaceAll(req.body, "NAME", name)))
				} else {
					st, data = call(t, s, top.Secret, req.method, strings.ReplaceAll(req.path, "NAME", name), nil)
				}
				if st != 403 || errorCode(data) != "forbidden" {
					t.Errorf("%s %s for %s: got %d %s, want 403 forbidden", req.method, req.path, name, st, data)
				}
				answers = append(answers, string(data))
			}
			if answers[0] != answers[1] {
				t.Errorf("%s %s: an existing and a missing account answer differently: %q and %q", req.method, req.path, answers[0], answers[1])
			}
		}
	})

	// The grandchild spends its branch's 50 micros; then its parent, which
	// spent nothing itself, is past its limit too.
	end := spendAll(t, s, grandchild.Secret)
	if end.EndReason != "spending_limit" || end.CostMicros < 50 {
		t.Fatalf("the grandchild's sandbox: got end reason %q at %d micros, want spending_limit at 50 or more", end.EndReason, end.CostMicros)
	}
	branch := end.CostMicros
	if st, _, code := (sbx{t, s, child.Secret}).create(`{"vcpus":1,"memory_mib":512}`); st != 402 || code != "spending_limit_reached" {
		t.Fatalf("create by the child whose grandchild spent its limit: got %d %s, want 402 spending_limit_reached", st, code)
	}
	if st, _, code := (sbx{t, s, grandchild.Secret}).create(`{"vcpus":1,"memory_mib":512}`); st != 402 || code != "spending_limit_reached" {
		t.Fatalf("create by the grandchild past its limit: got %d %s, want 402", st, code)
	}

	// The sibling may spend 100 of its own, but the top key's 100 hold for
	// the whole family: its sandbox stops mid-lease when the family's total
	// reaches 100, below its own limit.
	end = spendAll(t, s, sibling.Secret)
	if end.EndReason != "spending_limit" || end.CostMicros >= 100 {
		t.Fatalf("the sibling's sandbox: got end reason %q at %d micros, want spending_limit below its own limit of 100", end.EndReason, end.CostMicros)
	}
	t.Logf("the grandchild spent %d micros (branch limit 50), the sibling %d (family limit 100)", branch, end.CostMicros)
	if total := branch + end.CostMicros; total < 100 || total > 160 {
		t.Errorf("the family spent %d micros against a limit of 100", total)
	}
	for name, k := range map[string]api.Key{"top": top, "sibling": sibling, "child": child} {
		if st, _, code := (sbx{t, s, k.Secret}).create(`{"vcpus":1,"memory_mib":512}`); st != 402 || code != "spending_limit_reached" {
			t.Errorf("create by %s past the family's limit: got %d %s, want 402 spending_limit_reached", name, st, code)
		}
	}

	// The attack itself: past its limit, the top key mints a full key with
	// no limit. The new key is bound and spends nothing.
	for _, body := range []string{`{"kind":"full"}`, `{"kind":"full","daily_limit_micros":0}`} {
		fresh := minted(top.Secret, body, top.ID, 100)
		if st, _, code := (sbx{t, s, fresh.Secret}).create(`{"vcpus":1,"memory_mib":512}`); st != 402 || code != "spending_limit_reached" {
			t.Errorf("create by a key minted past the limit (%s): got %d %s, want 402 spending_limit_reached", body, st, code)
		}
	}
	refused(top.Secret, `{"kind":"full","daily_limit_micros":100000}`)

	// Removing the child removes the grandchild, and what they spent still
	// counts: the top key stays past its limit.
	if st, data := call(t, s, top.Secret, "DELETE", "/v1/keys/"+child.ID, nil); st != 204 {
		t.Fatalf("removing the child: %d %s", st, data)
	}
	for _, k := range []api.Key{child, grandchild} {
		if st, _ := call(t, s, k.Secret, "GET", "/v1/sandboxes", nil); st != 401 {
			t.Errorf("key %s after its branch was removed: got %d, want 401", k.ID, st)
		}
	}
	if st, _, code := (sbx{t, s, top.Secret}).create(`{"vcpus":1,"memory_mib":512}`); st != 402 || code != "spending_limit_reached" {
		t.Errorf("create by the top key after removing the branch that spent: got %d %s, want 402", st, code)
	}
	// A child cannot remove the key it answers to.
	if st, data := call(t, s, sibling.Secret, "DELETE", "/v1/keys/"+top.ID, nil); st != 403 || errorCode(data) != "forbidden" {
		t.Errorf("a child removing its parent: got %d %s, want 403 forbidden", st, data)
	}
}
