package cluster_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// putSnapshot stores a snapshot of acct on node, made with compat.
func putSnapshot(t *testing.T, st store.Store, id, node, compat string) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sn := &sandbox.Snapshot{
		ID: id, Account: "acct", SandboxID: "sb-src", Node: node, Compat: compat,
		Spec: sandbox.Spec{VCPUs: 2, MemoryMiB: 1024}, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}
	if err := st.PutSnapshot(t.Context(), sn); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotPlacement(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	holder := startNode(t, ca, st, "holder") // holds the snapshot; the busier
	empty := startNode(t, ca, st, "empty")   // the least loaded, same compat
	gone := startNode(t, ca, st, "gone")
	upgraded := startNode(t, ca, st, "upgraded")
	register(t, st, holder, nodeOpts{compat: "runsc-1", load: store.NodeLoad{Sandboxes: 2, VCPUs: 4, MemoryMiB: 8192}})
	register(t, st, empty, nodeOpts{compat: "runsc-1"})
	register(t, st, gone, nodeOpts{compat: "runsc-1", ttl: 50 * time.Millisecond, lost: true})
	register(t, st, upgraded, nodeOpts{compat: "runsc-2"})
	putSnapshot(t, st, "snap_held", "holder", "runsc-1")
	putSnapshot(t, st, "snap_gone", "gone", "runsc-1")
	putSnapshot(t, st, "snap_old", "upgraded", "runsc-1")
	putSnapshot(t, st, "snap_unregistered", "never", "runsc-1")
	c := newControl(t, st, ca, nil, 0)
	ctx := t.Context()
	from := func(id string) service.CreateRequest { return service.CreateRequest{Snapshot: id} }

	// On the snapshot's node, though another of its compat is emptier.
	for range 2 {
		rec, err := c.Create(ctx, "acct", "key", from("snap_held"))
		if err != nil || rec.Node != "holder" {
			t.Fatalf("create from a snapshot: got %+v, %v; want it on node holder", rec, err)
		}
	}
	// Its node full: the node's answer, not a cold start elsewhere.
	holder.refuse = sandbox.KindCapacityExhausted
	if _, err := c.Create(ctx, "acct", "key", from("snap_held")); sandbox.KindOf(err) != sandbox.KindCapacityExhausted {
		t.Errorf("create from a snapshot on a full node: got %v, want capacity_exhausted", err)
	}
	holder.refuse = ""
	for _, tc := range []struct{ snap, kind, says string }{
		{"snap_gone", string(sandbox.KindConflict), "which is lost"},
		{"snap_unregistered", string(sandbox.KindConflict), "which is lost"},
		{"snap_old", string(sandbox.KindConflict), "cannot restore it"},
		{"snap_none", string(sandbox.KindNotFound), "not found"},
	} {
		_, err := c.Create(ctx, "acct", "key", from(tc.snap))
		if string(sandbox.KindOf(err)) != tc.kind || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("create from %s: got %v, want %s: ...%s", tc.snap, err, tc.kind, tc.says)
		}
	}
	if _, err := c.Create(ctx, "other", "key", from("snap_held")); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("create from another account's snapshot: got %v, want not_found", err)
	}
	for n, want := range map[*fakeNode]int{holder: 3, empty: 0, gone: 0, upgraded: 0} {
		if creates, _ := n.counts(); creates != want {
			t.Errorf("node %s was sent %d creates, want %d", n.id, creates, want)
		}
	}

	// Reads come from the store, whatever node holds the snapshot.
	list, err := c.ListSnapshots(ctx, "acct")
	if err != nil || len(list) != 4 {
		t.Fatalf("list: got %d snapshots, %v; want 4", len(list), err)
	}
	if _, err := c.GetSnapshot(ctx, "other", "snap_held"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another account's snapshot: got %v, want not_found", err)
	}
	// A delete goes to the node that holds the files; a gone node's
	// snapshot loses its record here.
	if err := c.DeleteSnapshot(ctx, "acct", "snap_held"); err != nil {
		t.Fatal(err)
	}
	if _, ops := holder.counts(); !slices.Equal(ops, []string{"delete_snapshot snap_held acct"}) {
		t.Errorf("holder was asked %q, want the delete", ops)
	}
	if err := c.DeleteSnapshot(ctx, "acct", "snap_gone"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"snap_held", "snap_gone"} {
		if _, err := st.GetSnapshot(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s after delete: got %v, want not found", id, err)
		}
	}
	if _, ops := gone.counts(); len(ops) != 0 {
		t.Errorf("the lost node was asked %q", ops)
	}
}
