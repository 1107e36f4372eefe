package cluster

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// restartsLoseNothing: a key revoked through one API server is refused by
// the other at once; a rolling restart of every API server loses nothing;
// a node daemon killed and started again within its lease re-adopts its
// running sandbox (processes and files) instead of losing it.
func restartsLoseNothing(t *testing.T, r *rig) {
	key := r.account("restarts", 0, 0)
	a0, a1 := r.apis[0], r.apis[1]

	// Revocation: a second key of the account, made and removed through
	// a0, is refused by a1 on the next request.
	st, data := r.do(a0, key, "POST", "/v1/keys", api.CreateKeyRequest{Name: "short-lived"})
	if st != 201 {
		t.Fatalf("making a key: %d %s", st, data)
	}
	var k api.Key
	json.Unmarshal(data, &k)
	if st, data := r.do(a1, k.Secret, "GET", "/v1/sandboxes", nil); st != 200 {
		t.Fatalf("the new key through the other API server: %d %s", st, data)
	}
	if st, data := r.do(a0, key, "DELETE", "/v1/keys/"+k.ID, nil); st != 204 {
		t.Fatalf("removing the key: %d %s", st, data)
	}
	if st, data := r.do(a1, k.Secret, "GET", "/v1/sandboxes", nil); st != 401 || errorCode(data) != "unauthorized" {
		t.Fatalf("the removed key through the other API server: %d %s, want 401 unauthorized", st, data)
	}

	sb := r.mustCreate(a0, key, "{"+small+"}")
	n := r.byID(sb.Node)
	r.waitLoad(n, 1)
	if st, data := r.do(a0, key, "POST", "/v1/sandboxes/"+sb.ID+"/exec", `{"cmd":"sleep 600","background":true}`); st != 201 {
		t.Fatalf("starting a process: %d %s", st, data)
	}
	if res := r.exec(a1, key, sb.ID, "echo kept > /workspace/kept && pgrep -x sleep"); res.status != 200 || res.exit != 0 {
		t.Fatalf("writing the state: %v", res)
	}
	check := func(what string) {
		t.Helper()
		for _, a := range r.apis {
			got := r.get(a, key, sb.ID)
			if got.State != "running" || got.Node != sb.Node {
				t.Fatalf("after %s, through %s: %s on %s, want running on %s", what, a.name, got.State, got.Node, sb.Node)
			}
			res := r.exec(a, key, sb.ID, "cat /workspace/kept && pgrep -x sleep >/dev/null && echo sleeping")
			if res.status != 200 || res.exit != 0 || res.stdout != "kept\nsleeping\n" {
				t.Fatalf("after %s, exec through %s: %v, want its file and its process", what, a.name, res)
			}
		}
	}

	// A rolling restart of the API servers, the second killed outright.
	a0.stop()
	r.startAPIProc(a0)
	check("restarting " + a0.name)
	a1.kill9()
	r.startAPIProc(a1)
	check("killing and restarting " + a1.name)

	// The node daemon killed and started again well within its lease.
	epoch := r.nodeEntry(n).Epoch
	n.kill9()
	r.startNode(n)
	r.waitNode(n)
	if e := r.nodeEntry(n); e == nil || e.Epoch <= epoch || e.Lost {
		t.Fatalf("the restarted node's entry: %+v, want a new epoch after %d, not lost", e, epoch)
	}
	check("restarting the node daemon")
	// And it stays so past the lease: nothing gave up on it.
	time.Sleep(nodeLease + 2*detectEvery)
	check("a lease after the node daemon's restart")
	r.endOwned(key, sb.ID)
	end := r.waitFor(a0, key, sb.ID, 30*time.Second, "ended", func(s api.Sandbox) bool { return s.State == "ended" })
	if end.EndReason != "stopped" {
		t.Fatalf("end reason %q, want stopped", end.EndReason)
	}
}
