package cluster

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// snapshotAndFork takes a snapshot through one API server and forks
// through the other: the snapshot's record names the source's node, the
// forks and a create from the snapshot land there and go on from the
// source's state; once that node is lost, a create from the snapshot is
// refused (conflict), and its delete drops the record.
func snapshotAndFork(t *testing.T, r *rig) {
	key := r.account("snapfork", 0, 0)
	sb := r.mustCreate(r.apis[0], key, "{"+small+"}")
	n := r.byID(sb.Node)
	r.makeState(r.apis[0], key, sb.ID)
	st, data := r.do(r.apis[0], key, "POST", "/v1/sandboxes/"+sb.ID+"/snapshots", `{"name":"before"}`)
	if st != 201 {
		t.Fatalf("snapshot through %s: %d %s", r.apis[0].name, st, data)
	}
	var snap api.Snapshot
	json.Unmarshal(data, &snap)
	rec, err := r.st.GetSnapshot(t.Context(), snap.ID)
	if err != nil || rec.Node != sb.Node || rec.Compat == "" || rec.Compat != r.nodeEntry(n).Compat {
		t.Fatalf("the snapshot's record: %+v, %v; want it on %s with its compat", rec, err, sb.Node)
	}
	if st, data := r.do(r.apis[1], key, "GET", "/v1/snapshots/"+snap.ID, nil); st != 200 || !strings.Contains(string(data), sb.ID) {
		t.Fatalf("the snapshot through %s: %d %s", r.apis[1].name, st, data)
	}

	st, data = r.do(r.apis[1], key, "POST", "/v1/sandboxes/"+sb.ID+"/fork", `{"count":2}`)
	var fork api.ForkResult
	json.Unmarshal(data, &fork)
	for _, f := range fork.Sandboxes {
		r.own(key, f.ID)
	}
	if st != 201 || len(fork.Sandboxes) != 2 || fork.Snapshot != nil {
		t.Fatalf("fork through %s: %d %s", r.apis[1].name, st, data)
	}
	st, from, data := r.create(r.apis[1], key, `{"snapshot":"`+snap.ID+`"}`)
	if st != 201 {
		t.Fatalf("create from the snapshot through %s: %d %s", r.apis[1].name, st, data)
	}
	started := append(fork.Sandboxes, from)
	for _, s := range started {
		if s.Node != sb.Node {
			t.Fatalf("%s started on %s, want the snapshot's node %s", s.ID, s.Node, sb.Node)
		}
		a, b := r.checkState(r.apis[0], key, s.ID)
		t.Logf("%s on %s: counter %d -> %d", s.ID, s.Node, a, b)
	}
	for _, s := range started {
		r.endOwned(key, s.ID)
	}
	r.endOwned(key, sb.ID)

	// The snapshot's node goes: a create from it is refused, never
	// started cold elsewhere; its record can still be deleted.
	n.kill9()
	defer func() {
		r.startNode(n)
		r.waitNode(n)
	}()
	deadline := time.Now().Add(lostWithin)
	for e := r.nodeEntry(n); e == nil || !e.Lost; e = r.nodeEntry(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%s was not declared lost", n.name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, _, data = r.create(r.apis[0], key, `{"snapshot":"`+snap.ID+`"}`)
	if st != 409 || errorCode(data) != "conflict" || !strings.Contains(string(data), "lost") {
		t.Fatalf("create from a lost node's snapshot: %d %s, want 409 conflict: ... lost", st, data)
	}
	if st, data := r.do(r.apis[1], key, "DELETE", "/v1/snapshots/"+snap.ID, nil); st != 204 {
		t.Fatalf("deleting a lost node's snapshot: %d %s", st, data)
	}
	if st, _ := r.do(r.apis[0], key, "GET", "/v1/snapshots/"+snap.ID, nil); st != 404 {
		t.Fatalf("the deleted snapshot: %d, want 404", st)
	}
}
