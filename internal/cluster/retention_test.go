package cluster_test

import (
	"slices"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// TestDetectorEndsRetainedCheckpoints: a lost node's shared checkpoint
// whose retention is over is stopped by a compatible live node with reason
// retention_ended (so the checkpoint goes); one whose retention runs on
// stays, as does one on a live node (its own reaper's) and one no live node
// can restore (said once).
func TestDetectorEndsRetainedCheckpoints(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	live := startNode(t, ca, st, "live")
	gone := startNode(t, ca, st, "gone")
	register(t, st, live, nodeOpts{compat: "c", shared: true})
	register(t, st, gone, nodeOpts{ttl: 50 * time.Millisecond, compat: "c", shared: true, lost: true})
	logs := &logBuffer{}
	c := newControl(t, st, ca, logs, time.Hour)
	ctx := t.Context()

	retained := func(id, node, compat string, ends time.Duration) *sandbox.Record {
		r := putRecord(t, st, id, node, sandbox.StatePaused, &sandbox.Checkpoint{Shared: true, Compat: compat})
		at := time.Now().UTC().Add(ends)
		r.RetentionEndsAt = &at
		if err := st.PutSandbox(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	over := retained("sb-over", "gone", "c", -time.Second)
	noEntry := retained("sb-no-entry", "ghost", "c", -time.Second)
	running := retained("sb-retained", "gone", "c", time.Hour)
	onLive := retained("sb-on-live", "live", "c", -time.Second)
	nobody := retained("sb-nobody", "gone", "other", -time.Second)

	c.DetectOnce(ctx)
	c.DetectOnce(ctx)

	for _, want := range []struct {
		rec    *sandbox.Record
		state  sandbox.State
		reason sandbox.EndReason
	}{
		{over, sandbox.StateEnded, sandbox.EndRetentionEnded},
		{noEntry, sandbox.StateEnded, sandbox.EndRetentionEnded},
		{running, sandbox.StatePaused, ""},
		{onLive, sandbox.StatePaused, ""},
		{nobody, sandbox.StatePaused, ""},
	} {
		got, err := st.GetSandbox(ctx, want.rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != want.state || got.EndReason != want.reason {
			t.Errorf("%s: got %s %q, want %s %q", got.ID, got.State, got.EndReason, want.state, want.reason)
		}
	}
	_, ops := live.counts()
	slices.Sort(ops)
	if want := []string{"stop sb-no-entry", "stop sb-over"}; !slices.Equal(ops, want) {
		t.Errorf("the live node was asked %q, want %q", ops, want)
	}
	if got := logs.count("retention of a lost node's shared checkpoint is over, but no live node can remove it; it stays until one can"); got != 1 {
		t.Errorf("no remover logged %d times over two passes, want once", got)
	}
}

// TestDetectorExpiresLostSnapshots: the record of a lost node's snapshot
// whose retention is over goes; one whose retention runs on stays, and so
// does an expired one on a live node (its own reaper removes it, files and
// all).
func TestDetectorExpiresLostSnapshots(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	live := startNode(t, ca, st, "live")
	gone := startNode(t, ca, st, "gone")
	register(t, st, live, nodeOpts{compat: "c"})
	register(t, st, gone, nodeOpts{ttl: 50 * time.Millisecond, compat: "c", lost: true})
	c := newControl(t, st, ca, &logBuffer{}, time.Hour)
	ctx := t.Context()
	now := time.Now().UTC()
	for _, sn := range []*sandbox.Snapshot{
		{ID: "snap-over", Node: "gone", ExpiresAt: now.Add(-time.Second)},
		{ID: "snap-no-entry", Node: "ghost", ExpiresAt: now.Add(-time.Second)},
		{ID: "snap-kept", Node: "gone", ExpiresAt: now.Add(time.Hour)},
		{ID: "snap-on-live", Node: "live", ExpiresAt: now.Add(-time.Second)},
	} {
		sn.Account, sn.SandboxID, sn.CreatedAt = "acct", "sb", now.Add(-time.Hour)
		if err := st.PutSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
	}
	c.DetectOnce(ctx)
	left, err := st.ListSnapshots(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sn := range left {
		ids = append(ids, sn.ID)
	}
	slices.Sort(ids)
	if want := []string{"snap-kept", "snap-on-live"}; !slices.Equal(ids, want) {
		t.Fatalf("snapshots left %v, want %v", ids, want)
	}
}
