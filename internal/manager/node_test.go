package manager

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// The node-side of many hosts: a manager that is one node of a shared
// store (Config.Node), fenced when it cannot renew its lease, and the
// records other processes write under it.

// nodeRig is the rig as node n1.
func nodeRig(t *testing.T, config func(*Config)) *rig {
	return newRig(t, func(c *Config) {
		c.Node = "n1"
		if config != nil {
			config(c)
		}
	})
}

// peer is a second manager on the rig's store and clock: another node.
func (r *rig) peer(node string, be *fakeBackend, config func(*Config)) *Manager {
	r.t.Helper()
	cfg := Config{
		Backend: be, Store: r.st, Now: r.clock.Now, Node: node,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		HostCPUs: 64, HostMemoryMiB: 1 << 20,
		DiskFree: func() (int64, error) { return 1 << 50, nil },
	}
	if config != nil {
		config(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(m.Close)
	return m
}

// otherWriter changes a record as another process would (the failure
// detector, another node), with the version it read.
func (r *rig) otherWriter(id string, f func(rec *sandbox.Record)) *sandbox.Record {
	r.t.Helper()
	rec := r.record(id)
	f(rec)
	if err := r.st.PutSandbox(r.t.Context(), rec); err != nil {
		r.t.Fatalf("the other writer: %v", err)
	}
	return rec
}

// endedElsewhere is what the failure detector writes: ended node_lost,
// usage as it was.
func endedElsewhere(now time.Time) func(rec *sandbox.Record) {
	return func(rec *sandbox.Record) {
		rec.State, rec.EndedAt, rec.EndReason = sandbox.StateEnded, &now, sandbox.EndNodeLost
	}
}

// ledger sums the account's usage rows.
func (r *rig) ledger() store.UsageRow {
	r.t.Helper()
	rows, err := r.st.Usage(r.t.Context(), store.UsageFilter{Account: "acct"})
	if err != nil {
		r.t.Fatal(err)
	}
	var sum store.UsageRow
	for _, row := range rows {
		sum.AliveMs += row.AliveMs
		sum.CostNanos += row.CostNanos
	}
	return sum
}

func TestRecordsCarryTheNode(t *testing.T) {
	r := nodeRig(t, nil)
	rec := r.create(service.CreateRequest{})
	if got := r.record(rec.ID).Node; got != "n1" {
		t.Fatalf("got node %q, want n1", got)
	}
	// Another node's running record is not this node's to reap or meter.
	other := r.peer("n2", newFakeBackend(), nil)
	o, err := other.Create(t.Context(), "acct", "", service.CreateRequest{TimeoutSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Minute)
	r.m.Reap(t.Context())
	r.m.Meter(t.Context())
	got := r.record(o.ID)
	if got.State != sandbox.StateRunning || got.Usage.AliveMs != 0 {
		t.Errorf("n2's sandbox after n1's reaper and meter: %s, alive %d ms; want running and unmetered", got.State, got.Usage.AliveMs)
	}
	if _, err := r.m.Extend(t.Context(), "acct", o.ID, time.Minute); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("n1 extending n2's sandbox: got %v, want conflict", err)
	}
}

func TestFenceRefusesWorkAndStopsBilling(t *testing.T) {
	r := nodeRig(t, nil)
	rec := r.create(service.CreateRequest{})
	paused := r.create(service.CreateRequest{})
	if _, err := r.m.Pause(t.Context(), "acct", paused.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Fence(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !r.m.Fenced() || !r.be.isFrozen(rec.ID) {
		t.Fatalf("fenced %v, sandbox frozen %v: want both", r.m.Fenced(), r.be.isFrozen(rec.ID))
	}
	ctx := t.Context()
	refused := map[string]error{}
	_, refused["create"] = r.m.Create(ctx, "acct", "", service.CreateRequest{})
	_, refused["agent"] = r.m.Agent(ctx, "acct", rec.ID)
	_, refused["pause"] = r.m.Pause(ctx, "acct", rec.ID)
	_, refused["resume"] = r.m.Resume(ctx, "acct", paused.ID)
	_, refused["extend"] = r.m.Extend(ctx, "acct", rec.ID, time.Minute)
	_, refused["set lease"] = r.m.SetLease(ctx, "acct", rec.ID, time.Minute)
	_, refused["set network"] = r.m.SetNetwork(ctx, "acct", rec.ID, sandbox.Network{})
	for op, err := range refused {
		if sandbox.KindOf(err) != sandbox.KindCapacityExhausted || !strings.Contains(sandbox.MessageOf(err), "cannot reach the store") {
			t.Errorf("%s while fenced: got %v, want capacity_exhausted: this node cannot reach the store", op, err)
		}
	}
	before := r.record(rec.ID).Usage
	r.clock.Advance(time.Minute)
	r.m.Meter(ctx)
	if got := r.record(rec.ID).Usage; got.AliveMs != before.AliveMs || got.CostNanos != before.CostNanos {
		t.Errorf("metered while fenced: alive %d -> %d ms, cost %d -> %d", before.AliveMs, got.AliveMs, before.CostNanos, got.CostNanos)
	}
	if err := r.m.Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	if r.m.Fenced() || r.be.isFrozen(rec.ID) {
		t.Fatalf("after Unfence: fenced %v, frozen %v; want neither", r.m.Fenced(), r.be.isFrozen(rec.ID))
	}
	if _, err := r.m.Agent(ctx, "acct", rec.ID); err != nil {
		t.Errorf("agent after Unfence: %v", err)
	}
	r.clock.Advance(time.Second)
	r.m.Meter(ctx)
	if got := r.record(rec.ID).Usage; got.AliveMs <= before.AliveMs {
		t.Errorf("after Unfence the meter bills again: alive %d ms, want more than %d", got.AliveMs, before.AliveMs)
	}
	r.consistent(rec.ID)
	r.consistent(paused.ID)
}

func TestUnfenceThawsOwnedAndDropsTheRest(t *testing.T) {
	r := nodeRig(t, nil)
	owned := r.create(service.CreateRequest{})
	lost := r.create(service.CreateRequest{})
	moved := r.create(service.CreateRequest{})
	if err := r.m.Fence(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Meanwhile the detector ended one, and one is another node's.
	lostRec := r.otherWriter(lost.ID, endedElsewhere(r.m.now()))
	movedRec := r.otherWriter(moved.ID, func(rec *sandbox.Record) { rec.Node = "n2" })
	if err := r.m.Unfence(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r.be.state(owned.ID) != sandbox.StateRunning || r.be.isFrozen(owned.ID) {
		t.Errorf("the owned sandbox: on the backend %q, frozen %v; want running, thawed", r.be.state(owned.ID), r.be.isFrozen(owned.ID))
	}
	r.consistent(owned.ID)
	for _, want := range []*sandbox.Record{lostRec, movedRec} {
		r.settled(want.ID)
		if st := r.be.state(want.ID); st != "" {
			t.Errorf("%s: still %s on the backend, want destroyed", want.ID, st)
		}
		if admitted, _ := r.live(want.ID); admitted {
			t.Errorf("%s still holds room", want.ID)
		}
		if got := r.record(want.ID); got.Version != want.Version || got.State != want.State || got.Node != want.Node {
			t.Errorf("%s: record written by the manager (version %d -> %d, %s, node %q)", want.ID, want.Version, got.Version, got.State, got.Node)
		}
	}
}

func TestDropUnowned(t *testing.T) {
	r := nodeRig(t, nil)
	owned := r.create(service.CreateRequest{})
	lost := r.create(service.CreateRequest{})
	want := r.otherWriter(lost.ID, endedElsewhere(r.m.now()))
	if err := r.m.DropUnowned(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := r.be.state(lost.ID); st != "" {
		t.Errorf("the ended sandbox is still %s on the backend", st)
	}
	if got := r.record(lost.ID); got.Version != want.Version {
		t.Errorf("the ended sandbox's record was written: version %d -> %d", want.Version, got.Version)
	}
	r.consistent(owned.ID)
	if n := r.be.count("freeze") + r.be.count("thaw"); n != 0 {
		t.Errorf("DropUnowned froze or thawed %d times, want none", n)
	}
}

func TestEndAllEndsNodeLostWithoutSettling(t *testing.T) {
	r := nodeRig(t, nil)
	a := r.create(service.CreateRequest{})
	b := r.create(service.CreateRequest{})
	r.clock.Advance(10 * time.Second)
	r.m.Meter(t.Context())
	usage := map[string]sandbox.Usage{a.ID: r.record(a.ID).Usage, b.ID: r.record(b.ID).Usage}
	ledger := r.ledger()
	if ledger.AliveMs == 0 {
		t.Fatal("nothing was metered before the end")
	}
	r.clock.Advance(time.Minute)
	if err := r.m.Fence(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.m.EndAll(t.Context(), sandbox.EndNodeLost); err != nil {
		t.Fatal(err)
	}
	for id, u := range usage {
		got := r.consistent(id)
		if got.State != sandbox.StateEnded || got.EndReason != sandbox.EndNodeLost {
			t.Errorf("%s: got %s (%s), want ended (node_lost)", id, got.State, got.EndReason)
		}
		if got.Usage.AliveMs != u.AliveMs || got.Usage.CostNanos != u.CostNanos {
			t.Errorf("%s: usage %+v after EndAll, want it as at the last sample %+v", id, got.Usage, u)
		}
	}
	if got := r.ledger(); got != ledger {
		t.Errorf("ledger after EndAll: %+v, want unchanged %+v", got, ledger)
	}
	if l := r.m.Load(); l != (store.NodeLoad{}) {
		t.Errorf("load after EndAll: %+v, want nothing", l)
	}
}

// TestStaleMeterWriteDestroysTheSandbox: the detector ends a record
// between the meter's read and its write. The write is refused as stale:
// the sandbox goes here, and the record and the ledger stay as the
// detector left them.
func TestStaleMeterWriteDestroysTheSandbox(t *testing.T) {
	r := nodeRig(t, nil)
	rec := r.create(service.CreateRequest{})
	ledger := r.ledger()
	var want *sandbox.Record
	r.st.setFailPut(func(w *sandbox.Record) error {
		if w.ID == rec.ID && want == nil {
			want, _ = r.st.Bolt.GetSandbox(t.Context(), rec.ID)
			endedElsewhere(r.m.now())(want)
			if err := r.st.Bolt.PutSandbox(t.Context(), want); err != nil {
				t.Errorf("the other writer: %v", err)
			}
		}
		return nil
	})
	r.clock.Advance(time.Minute)
	r.be.setCPU(rec.ID, time.Second)
	r.m.Meter(t.Context())
	r.st.setFailPut(nil)
	if want == nil {
		t.Fatal("the meter wrote nothing")
	}
	r.settled(rec.ID)
	if st := r.be.state(rec.ID); st != "" {
		t.Errorf("after a stale meter write the sandbox is still %s on the backend", st)
	}
	if admitted, _ := r.live(rec.ID); admitted {
		t.Error("after a stale meter write the sandbox still holds room")
	}
	got := r.record(rec.ID)
	if got.Version != want.Version || got.EndReason != sandbox.EndNodeLost || got.Usage != want.Usage {
		t.Errorf("record after the stale write: version %d, %s, usage %+v; want the other writer's (version %d, node_lost, %+v)",
			got.Version, got.EndReason, got.Usage, want.Version, want.Usage)
	}
	if got := r.ledger(); got != ledger {
		t.Errorf("a stale sample reached the ledger: %+v, want %+v", got, ledger)
	}
}

func TestConcurrencyHoldsAcrossNodes(t *testing.T) {
	r := nodeRig(t, nil)
	if err := r.st.PutAccount(t.Context(), store.Account{ID: "acct", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	n2 := r.peer("n2", newFakeBackend(), nil)
	first := r.create(service.CreateRequest{})
	if _, err := n2.Create(t.Context(), "acct", "", service.CreateRequest{}); sandbox.KindOf(err) != sandbox.KindConcurrency {
		t.Fatalf("a second create on another node past a limit of 1: got %v, want concurrency_limit_reached", err)
	}
	if _, err := r.m.Stop(t.Context(), "acct", first.ID); err != nil {
		t.Fatal(err)
	}
	rec, err := n2.Create(t.Context(), "acct", "", service.CreateRequest{})
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	if rec.Node != "n2" {
		t.Errorf("got node %q, want n2", rec.Node)
	}
	if l := n2.Load(); l.Sandboxes != 1 || l.VCPUs != rec.Spec.VCPUs || l.MemoryMiB != rec.Spec.MemoryMiB {
		t.Errorf("n2's load %+v, want its one sandbox", l)
	}
}

func TestSharedCheckpointMovesToACompatibleNode(t *testing.T) {
	shared := func(compat string) func(*Config) {
		return func(c *Config) { c.SharedCheckpoints, c.NodeCompat = true, compat }
	}
	r := nodeRig(t, shared("runsc-1/avx2"))
	rec := r.create(service.CreateRequest{})
	paused, err := r.m.Pause(t.Context(), "acct", rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cp := paused.Checkpoint; cp == nil || !cp.Shared || cp.Compat != "runsc-1/avx2" {
		t.Fatalf("paused with shared checkpoints: checkpoint %+v, want shared, compat runsc-1/avx2", cp)
	}
	// The fake's boxes stand for the shared storage: the nodes share it.
	other := r.peer("n3", r.be, shared("runsc-2/avx2"))
	_, err = other.Resume(t.Context(), "acct", rec.ID)
	if msg := sandbox.MessageOf(err); sandbox.KindOf(err) != sandbox.KindConflict || !strings.Contains(msg, "runsc-1/avx2") || !strings.Contains(msg, "runsc-2/avx2") {
		t.Fatalf("resume on an incompatible node: got %v, want conflict naming both", err)
	}
	local := r.peer("n4", r.be, nil)
	if _, err := local.Resume(t.Context(), "acct", rec.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("resume on a node without shared checkpoints: got %v, want conflict", err)
	}
	n2 := r.peer("n2", r.be, shared("runsc-1/avx2"))
	got, err := n2.Resume(t.Context(), "acct", rec.ID)
	if err != nil {
		t.Fatalf("resume on a compatible node: %v", err)
	}
	if got.Node != "n2" || got.State != sandbox.StateRunning || got.Checkpoint != nil {
		t.Errorf("resumed: node %q, %s, checkpoint %+v; want n2, running, none", got.Node, got.State, got.Checkpoint)
	}
	if _, err := r.m.Pause(t.Context(), "acct", rec.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("n1 pausing what n2 runs: got %v, want conflict", err)
	}
	// Paused on n2, stopped on n1 (as when n2 is gone): allowed, and the
	// checkpoint goes.
	if _, err := n2.Pause(t.Context(), "acct", rec.ID); err != nil {
		t.Fatal(err)
	}
	ended, err := r.m.Stop(t.Context(), "acct", rec.ID)
	if err != nil || ended.State != sandbox.StateEnded {
		t.Fatalf("stopping n2's shared checkpoint on n1: got %+v, %v; want ended", ended, err)
	}
	if st := r.be.state(rec.ID); st != "" {
		t.Errorf("after the stop the checkpoint is still %s", st)
	}
}

func TestStopRefusesAnotherNodesLocalCheckpoint(t *testing.T) {
	r := nodeRig(t, nil)
	rec := r.create(service.CreateRequest{})
	if _, err := r.m.Pause(t.Context(), "acct", rec.ID); err != nil {
		t.Fatal(err)
	}
	n2 := r.peer("n2", r.be, func(c *Config) { c.SharedCheckpoints, c.NodeCompat = true, "x" })
	if _, err := n2.Stop(context.Background(), "acct", rec.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("stopping another node's local checkpoint: got %v, want conflict", err)
	}
	if _, err := n2.Resume(context.Background(), "acct", rec.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("resuming another node's local checkpoint: got %v, want conflict", err)
	}
	r.consistent(rec.ID)
}

// TestRecoverKeepsOnlyThisNodesSandboxes: a restarted node reattaches its
// own sandboxes and sweeps one whose record another node holds now,
// without writing that record.
func TestRecoverKeepsOnlyThisNodesSandboxes(t *testing.T) {
	r := nodeRig(t, nil)
	own := r.create(service.CreateRequest{})
	moved := r.create(service.CreateRequest{})
	want := r.otherWriter(moved.ID, func(rec *sandbox.Record) { rec.Node = "n2" })
	r.m.Close()
	again := r.peer("n1", r.be, nil)
	if err := again.Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := r.be.state(own.ID); st != sandbox.StateRunning {
		t.Errorf("n1's own sandbox after the restart: %q on the backend, want running", st)
	}
	if got := r.record(own.ID); got.State != sandbox.StateRunning {
		t.Errorf("n1's own sandbox's record after the restart: %s, want running", got.State)
	}
	if st := r.be.state(moved.ID); st != "" {
		t.Errorf("the sandbox n2 holds is still %s on n1's backend, want swept", st)
	}
	if got := r.record(moved.ID); got.Version != want.Version || got.State != sandbox.StateRunning {
		t.Errorf("n2's record was written by n1's recovery: version %d -> %d, %s", want.Version, got.Version, got.State)
	}
}

// TestStaleStopLeavesASharedCheckpoint: a node stops a shared checkpoint
// while another node takes it over (its write comes first). The stop's
// write is stale, and the checkpoint, the other node's sandbox now, stays.
func TestStaleStopLeavesASharedCheckpoint(t *testing.T) {
	shared := func(c *Config) { c.SharedCheckpoints, c.NodeCompat = true, "c" }
	r := nodeRig(t, shared)
	rec := r.create(service.CreateRequest{})
	if _, err := r.m.Pause(t.Context(), "acct", rec.ID); err != nil {
		t.Fatal(err)
	}
	n2 := r.peer("n2", r.be, shared)
	taken := false
	r.st.setFailPut(func(w *sandbox.Record) error {
		if w.ID == rec.ID && !taken {
			taken = true
			cur, _ := r.st.Bolt.GetSandbox(t.Context(), rec.ID)
			cur.State, cur.Node = sandbox.StateStarting, "n3"
			if err := r.st.Bolt.PutSandbox(t.Context(), cur); err != nil {
				t.Errorf("n3 taking the checkpoint: %v", err)
			}
		}
		return nil
	})
	r.clock.Advance(time.Minute)
	_, err := n2.Stop(t.Context(), "acct", rec.ID)
	r.st.setFailPut(nil)
	if !taken {
		t.Fatal("the stop wrote nothing")
	}
	if sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("a stop that lost the race: got %v, want conflict", err)
	}
	if st := r.be.state(rec.ID); st != sandbox.StatePaused {
		t.Errorf("the checkpoint n3 took: %q on the backend, want it paused still", st)
	}
	if got := r.record(rec.ID); got.Node != "n3" || got.State != sandbox.StateStarting {
		t.Errorf("record: node %q, %s; want n3's, starting", got.Node, got.State)
	}
}
