package manager

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// Review findings of the node side: a shared checkpoint's end against a
// resume elsewhere, interrupted resumes, failed usage writes, epochs,
// parallel fences and the frozen time.

// takeOnEnd makes the first write of id's end lose to another node (n3)
// that admits the shared checkpoint's resume first. It reports whether it
// fired.
func (r *rig) takeOnEnd(id string) func() bool {
	var mu sync.Mutex
	taken := false
	r.st.setFailPut(func(w *sandbox.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if w.ID == id && w.State == sandbox.StateEnded && !taken {
			taken = true
			cur, _ := r.st.Bolt.GetSandbox(context.Background(), id)
			cur.State, cur.Node = sandbox.StateStarting, "n3"
			if err := r.st.Bolt.PutSandbox(context.Background(), cur); err != nil {
				r.t.Errorf("n3 taking the checkpoint: %v", err)
			}
		}
		return nil
	})
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		return taken
	}
}

// TestEndLosingToAResumeKeepsTheSharedCheckpoint: the end of a shared
// checkpoint (a stop on another node, the reaper's retention end on its
// own) loses to a resume on n3 at the end's write. The checkpoint, n3's
// sandbox now, stays, and nothing of the end reaches the ledger.
func TestEndLosingToAResumeKeepsTheSharedCheckpoint(t *testing.T) {
	prices := billing.Prices{MemoryNanosPerGiBHour: 7_812_500, CPUNanosPerCPUHour: 24_375_000, StorageNanosPerGiBHour: 1_000_000}
	shared := func(c *Config) {
		c.SharedCheckpoints, c.NodeCompat, c.Retention, c.Prices = true, "c", time.Hour, &prices
	}
	for _, tc := range []struct {
		name string
		end  func(r *rig, n2 *Manager, id string) error
	}{
		{"stop on another node", func(r *rig, n2 *Manager, id string) error {
			_, err := n2.Stop(t.Context(), "acct", id)
			if sandbox.KindOf(err) != sandbox.KindConflict {
				t.Errorf("a stop that lost the race: got %v, want conflict", err)
			}
			return nil
		}},
		{"retention end", func(r *rig, n2 *Manager, id string) error {
			r.clock.Advance(time.Hour)
			r.m.Reap(t.Context())
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := nodeRig(t, shared)
			rec := r.create(service.CreateRequest{})
			if _, err := r.m.Pause(t.Context(), "acct", rec.ID); err != nil {
				t.Fatal(err)
			}
			n2 := r.peer("n2", r.be, shared)
			r.clock.Advance(time.Minute) // a paused time to settle
			ledger := r.ledger()
			fired := r.takeOnEnd(rec.ID)
			tc.end(r, n2, rec.ID)
			r.settled(rec.ID)
			r.st.setFailPut(nil)
			if !fired() {
				t.Fatal("the end wrote nothing")
			}
			if st := r.be.state(rec.ID); st != sandbox.StatePaused {
				t.Errorf("the checkpoint n3 took: %q on the backend, want paused still", st)
			}
			if got := r.record(rec.ID); got.Node != "n3" || got.State != sandbox.StateStarting {
				t.Errorf("record: node %q, %s; want n3's, starting", got.Node, got.State)
			}
			if got := r.ledger(); got != ledger {
				t.Errorf("the lost end billed: ledger %+v, want %+v", got, ledger)
			}
		})
	}
}

// TestSharedEndTheStoreRefusesKeepsTheCheckpoint: an end whose write fails
// removes nothing; a later stop ends it and bills the paused time once.
func TestSharedEndTheStoreRefusesKeepsTheCheckpoint(t *testing.T) {
	prices := billing.Prices{MemoryNanosPerGiBHour: 7_812_500, CPUNanosPerCPUHour: 24_375_000, StorageNanosPerGiBHour: 1_000_000}
	r := nodeRig(t, func(c *Config) { c.SharedCheckpoints, c.NodeCompat, c.Prices = true, "c", &prices })
	rec := r.create(service.CreateRequest{})
	if _, err := r.m.Pause(t.Context(), "acct", rec.ID); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Minute)
	r.st.setFailPut(func(*sandbox.Record) error { return errors.New("the store is away") })
	_, err := r.m.Stop(t.Context(), "acct", rec.ID)
	r.st.setFailPut(nil)
	if err == nil {
		t.Fatal("a stop whose write failed: got no error")
	}
	if st := r.be.state(rec.ID); st != sandbox.StatePaused {
		t.Fatalf("after a failed end the checkpoint is %q, want paused still", st)
	}
	got := r.consistent(rec.ID)
	if got.State != sandbox.StatePaused {
		t.Fatalf("record after a failed end: %s, want paused", got.State)
	}
	ended, err := r.m.Stop(t.Context(), "acct", rec.ID)
	if err != nil || ended.State != sandbox.StateEnded {
		t.Fatalf("the second stop: %+v, %v", ended, err)
	}
	if l := r.ledger(); l.CostNanos == 0 || l.CostNanos != ended.Usage.CostNanos || ended.Usage.PausedMs != time.Minute.Milliseconds() {
		t.Errorf("ledger cost %d, record cost %d, paused %d ms; want equal costs and %d ms", l.CostNanos, ended.Usage.CostNanos, ended.Usage.PausedMs, time.Minute.Milliseconds())
	}
	r.consistent(rec.ID)
}

// interruptResume leaves rec's record as a resume writes it before the
// backend restores (starting, this node's), as a kill -9 mid-restore
// would.
func (r *rig) interruptResume(id string) *sandbox.Record {
	return r.otherWriter(id, func(rec *sandbox.Record) { rec.State = sandbox.StateStarting })
}

func TestRecoverAfterAnInterruptedResume(t *testing.T) {
	for _, tc := range []struct {
		name     string
		restored bool // the restore finished before the kill
		want     sandbox.State
	}{
		{"restore not done", false, sandbox.StatePaused},
		{"restore done", true, sandbox.StateRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil)
			rec := r.create(service.CreateRequest{})
			if _, err := r.m.Pause(t.Context(), "acct", rec.ID); err != nil {
				t.Fatal(err)
			}
			r.interruptResume(rec.ID)
			if tc.restored {
				if _, err := r.be.Resume(t.Context(), rec.ID, rec.Spec); err != nil {
					t.Fatal(err)
				}
			}
			r.m.Close()
			r.m = r.peer("", r.be, nil)
			if err := r.m.Recover(t.Context()); err != nil {
				t.Fatal(err)
			}
			got := r.consistent(rec.ID)
			if got.State != tc.want {
				t.Fatalf("after Recover: %s (%s), want %s", got.State, got.EndReason, tc.want)
			}
			if tc.want == sandbox.StatePaused {
				if _, err := r.m.Resume(t.Context(), "acct", rec.ID); err != nil {
					t.Fatalf("resuming after the recovery: %v", err)
				}
				r.consistent(rec.ID)
			}
		})
	}
}

// ambiguousStore commits the next AdmitSandbox and answers it an error, as
// a connection lost after the commit does.
type ambiguousStore struct {
	*flakyStore
	mu  sync.Mutex
	arm bool
}

func (s *ambiguousStore) AdmitSandbox(ctx context.Context, r *sandbox.Record, limit int) error {
	err := s.flakyStore.AdmitSandbox(ctx, r, limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.arm {
		s.arm = false
		return errors.New("connection reset after the commit")
	}
	return err
}

func (s *ambiguousStore) setArm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arm = true
}

// TestAmbiguousAdmitIsTakenUpByTheReaper: a resume's and a create's
// starting write commits though the store answered an error. The reaper
// puts the resume back paused (its checkpoint kept) and ends the create,
// so neither stays starting (counted against the concurrency) for ever.
func TestAmbiguousAdmitIsTakenUpByTheReaper(t *testing.T) {
	r := newRig(t, nil)
	st := &ambiguousStore{flakyStore: r.st}
	r.m.Close()
	m, err := New(Config{
		Backend: r.be, Store: st, Now: r.clock.Now,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		HostCPUs: 64, HostMemoryMiB: 1 << 20,
		DiskFree: func() (int64, error) { return 1 << 50, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	r.m = m
	rec := r.create(service.CreateRequest{})
	if _, err := m.Pause(t.Context(), "acct", rec.ID); err != nil {
		t.Fatal(err)
	}
	st.setArm()
	if _, err := m.Resume(t.Context(), "acct", rec.ID); err == nil {
		t.Fatal("the resume got no error")
	}
	if got := r.record(rec.ID); got.State != sandbox.StateStarting {
		t.Fatalf("the rig: record %s after the ambiguous admit, want starting", got.State)
	}
	st.setArm()
	if _, err := m.Create(t.Context(), "acct", "", service.CreateRequest{}); err == nil {
		t.Fatal("the create got no error")
	}
	starting, err := r.st.ListSandboxes(t.Context(), store.SandboxFilter{States: []sandbox.State{sandbox.StateStarting}})
	if err != nil || len(starting) != 2 {
		t.Fatalf("starting records: %d (%v), want the resume's and the create's", len(starting), err)
	}
	m.Reap(t.Context())
	for _, s := range starting {
		r.settled(s.ID)
		got := r.record(s.ID)
		if s.ID == rec.ID {
			if got.State != sandbox.StatePaused || r.be.state(rec.ID) != sandbox.StatePaused {
				t.Errorf("the resume after the reaper: record %s, backend %q; want both paused", got.State, r.be.state(rec.ID))
			}
			continue
		}
		if got.State != sandbox.StateEnded || got.EndReason != sandbox.EndError {
			t.Errorf("the create after the reaper: %s (%s), want ended (error)", got.State, got.EndReason)
		}
	}
	if _, err := m.Resume(t.Context(), "acct", rec.ID); err != nil {
		t.Fatalf("resuming after the reaper: %v", err)
	}
	r.consistent(rec.ID)
}

// TestFailedUsageWriteLeavesTheRecordAsTheLedger: a sample the store
// refuses (not as stale) must not show up in the record that the
// operation writes next: the record's usage is what the ledger counted.
func TestFailedUsageWriteLeavesTheRecordAsTheLedger(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(m *Manager, id string) error
	}{
		{"extend", func(m *Manager, id string) error {
			_, err := m.Extend(context.Background(), "acct", id, time.Hour)
			return err
		}},
		{"pause", func(m *Manager, id string) error {
			_, err := m.Pause(context.Background(), "acct", id)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil)
			rec := r.create(service.CreateRequest{})
			r.clock.Advance(time.Minute)
			r.be.setCPU(rec.ID, time.Second)
			first := true
			r.st.setFailPut(func(*sandbox.Record) error {
				if first {
					first = false
					return errors.New("the store is away")
				}
				return nil
			})
			err := tc.op(r.m, rec.ID)
			r.st.setFailPut(nil)
			if err != nil {
				t.Fatal(err)
			}
			got, l := r.record(rec.ID).Usage, r.ledger()
			if got.AliveMs != l.AliveMs || got.CostNanos != l.CostNanos {
				t.Errorf("record alive %d ms, cost %d; ledger alive %d ms, cost %d: want equal", got.AliveMs, got.CostNanos, l.AliveMs, l.CostNanos)
			}
		})
	}
}

func TestRecordsNameTheNodeEpoch(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 1}}, func(c *Config) { c.Node = "n1" })
	r.waitPool(defaultKey, 1)
	r.m.SetNodeEpoch(7)
	members := r.members(defaultKey)
	claimed := r.create(service.CreateRequest{})
	if !members[claimed.ID] {
		t.Fatal("the rig: the create did not claim the pool member")
	}
	cold := r.create(service.CreateRequest{VCPUs: 1, MemoryMiB: 512})
	for _, id := range []string{claimed.ID, cold.ID} {
		if got := r.record(id).NodeEpoch; got != 7 {
			t.Errorf("%s: epoch %d, want 7", id, got)
		}
	}
	if _, err := r.m.Pause(t.Context(), "acct", cold.ID); err != nil {
		t.Fatal(err)
	}
	r.m.SetNodeEpoch(9) // registered again
	if _, err := r.m.Resume(t.Context(), "acct", cold.ID); err != nil {
		t.Fatal(err)
	}
	if got := r.record(cold.ID).NodeEpoch; got != 9 {
		t.Errorf("resumed under epoch 9: got epoch %d", got)
	}
}

func TestFenceFreezesInParallel(t *testing.T) {
	r := nodeRig(t, nil)
	var ids []string
	for range 40 {
		ids = append(ids, r.create(service.CreateRequest{VCPUs: 1, MemoryMiB: 512}).ID)
	}
	r.be.delay = 20 * time.Millisecond
	if err := r.m.Fence(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !r.be.isFrozen(id) {
			t.Fatalf("%s not frozen after Fence", id)
		}
	}
	if p := r.be.peakOf("freeze"); p < 2 || p > freezeParallel {
		t.Errorf("at most %d freezes at once, want 2 to %d", p, freezeParallel)
	}
	if n := r.be.count("freeze"); n != len(ids) {
		t.Errorf("%d freezes for %d sandboxes, want one each", n, len(ids))
	}
	if err := r.m.Fence(t.Context()); err != nil || r.be.count("freeze") != len(ids) {
		t.Errorf("a second Fence: %v, %d freezes; want no error and none more", err, r.be.count("freeze")-len(ids))
	}
}

// TestUnfenceCutShortStaysFrozen: an Unfence that fails after it thawed a
// sandbox leaves the node fenced with every sandbox frozen; Fence again
// changes nothing, and the next Unfence thaws them all.
func TestUnfenceCutShortStaysFrozen(t *testing.T) {
	r := nodeRig(t, nil)
	a := r.create(service.CreateRequest{})
	b := r.create(service.CreateRequest{})
	if err := r.m.Fence(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Second)
	writes := 0
	r.st.setFailPut(func(*sandbox.Record) error {
		if writes++; writes == 2 { // the second sandbox's: the first is thawed
			return errors.New("the store went away again")
		}
		return nil
	})
	err := r.m.Unfence(t.Context())
	r.st.setFailPut(nil)
	if err == nil {
		t.Fatal("an Unfence whose write failed: got no error")
	}
	frozen := func() bool { return r.be.isFrozen(a.ID) && r.be.isFrozen(b.ID) }
	if !r.m.Fenced() || !frozen() {
		t.Fatalf("after a failed Unfence: fenced %v, frozen %v %v; want fenced, both frozen", r.m.Fenced(), r.be.isFrozen(a.ID), r.be.isFrozen(b.ID))
	}
	freezes := r.be.count("freeze")
	if err := r.m.Fence(t.Context()); err != nil || !frozen() || r.be.count("freeze") != freezes {
		t.Errorf("Fence after the failed Unfence: %v, frozen %v, %d more freezes; want none", err, frozen(), r.be.count("freeze")-freezes)
	}
	if err := r.m.Unfence(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r.m.Fenced() || r.be.isFrozen(a.ID) || r.be.isFrozen(b.ID) {
		t.Errorf("after Unfence: fenced %v, frozen %v %v; want none", r.m.Fenced(), r.be.isFrozen(a.ID), r.be.isFrozen(b.ID))
	}
	r.consistent(a.ID)
	r.consistent(b.ID)
}

// TestFrozenTimeIsNotBilled: 30 s running, 10 minutes frozen by a fence,
// then 1 s running again: 31 s are billed, in the record and the ledger.
func TestFrozenTimeIsNotBilled(t *testing.T) {
	r := nodeRig(t, nil)
	rec := r.create(service.CreateRequest{})
	stopped := r.create(service.CreateRequest{})
	r.clock.Advance(30 * time.Second)
	if err := r.m.Fence(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(10 * time.Minute)
	// Stopped while fenced: billed to the freeze.
	ended, err := r.m.Stop(t.Context(), "acct", stopped.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := ended.Usage.AliveMs; got != 30_000 {
		t.Errorf("stopped after 10 minutes frozen: alive %d ms, want 30000", got)
	}
	if err := r.m.Unfence(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.m.Meter(t.Context())
	if got := r.record(rec.ID).Usage.AliveMs; got != 30_000 {
		t.Errorf("after 10 minutes frozen: alive %d ms, want 30000", got)
	}
	r.clock.Advance(time.Second)
	r.m.Meter(t.Context())
	u := r.record(rec.ID).Usage
	if u.AliveMs != 31_000 {
		t.Errorf("a second after the thaw: alive %d ms, want 31000", u.AliveMs)
	}
	if l := r.ledger(); l.AliveMs != u.AliveMs+ended.Usage.AliveMs || l.CostNanos != u.CostNanos+ended.Usage.CostNanos {
		t.Errorf("ledger %+v, want the records' sums (alive %d ms)", l, u.AliveMs+ended.Usage.AliveMs)
	}
}

// TestFenceAgainRetriesAFailedFreeze: a sandbox Fence could not freeze is
// frozen by the next Fence.
func TestFenceAgainRetriesAFailedFreeze(t *testing.T) {
	r := nodeRig(t, nil)
	rec := r.create(service.CreateRequest{})
	r.be.mu.Lock()
	r.be.fail = func(op, id string) error {
		if op == "freeze" {
			return errors.New("runsc pause failed")
		}
		return nil
	}
	r.be.mu.Unlock()
	if err := r.m.Fence(t.Context()); err == nil || r.be.isFrozen(rec.ID) {
		t.Fatalf("a failed freeze: Fence %v, frozen %v; want an error, not frozen", err, r.be.isFrozen(rec.ID))
	}
	r.be.mu.Lock()
	r.be.fail = nil
	r.be.mu.Unlock()
	if err := r.m.Fence(t.Context()); err != nil || !r.be.isFrozen(rec.ID) {
		t.Errorf("Fence again: %v, frozen %v; want frozen", err, r.be.isFrozen(rec.ID))
	}
}

// TestChangedSharedCheckpointIsNotRestored: a shared checkpoint's record
// keeps the digest its pause saved, and a resume of a checkpoint changed
// since is refused, the sandbox paused still.
func TestChangedSharedCheckpointIsNotRestored(t *testing.T) {
	shared := func(c *Config) { c.SharedCheckpoints, c.NodeCompat = true, "c" }
	r := nodeRig(t, shared)
	rec := r.create(service.CreateRequest{})
	paused, err := r.m.Pause(t.Context(), "acct", rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if paused.Checkpoint == nil || paused.Checkpoint.Digest == "" {
		t.Fatalf("paused: checkpoint %+v, want a digest", paused.Checkpoint)
	}
	r.be.tamper(rec.ID)
	n2 := r.peer("n2", r.be, shared)
	if _, err := n2.Resume(t.Context(), "acct", rec.ID); sandbox.KindOf(err) != sandbox.KindInternal {
		t.Fatalf("resuming a changed checkpoint: got %v, want internal (stays paused)", err)
	}
	if got := r.record(rec.ID); got.State != sandbox.StatePaused || r.be.state(rec.ID) != sandbox.StatePaused {
		t.Errorf("after the refused resume: record %s, backend %q; want both paused", got.State, r.be.state(rec.ID))
	}
}
