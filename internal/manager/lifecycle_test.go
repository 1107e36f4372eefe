package manager

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// The unit-level lifecycle suite: deadlines and bills on a fake clock, in
// milliseconds. See rig_test.go and fakebackend_test.go; the real
// headline-rate test is test/e2e's billing test.

func TestLeaseEndsAtTheDeadline(t *testing.T) {
	r := newRig(t, nil)
	rec := r.create(service.CreateRequest{TimeoutSeconds: 60})
	r.clock.Advance(60*time.Second - time.Millisecond)
	r.m.Reap(t.Context())
	if got := r.consistent(rec.ID).State; got != sandbox.StateRunning {
		t.Fatalf("a millisecond before the deadline: got %s, want running", got)
	}
	r.clock.Advance(time.Millisecond)
	r.m.Reap(t.Context())
	got := r.consistent(rec.ID)
	if got.State != sandbox.StateEnded || got.EndReason != sandbox.EndLeaseEnded {
		t.Fatalf("at the deadline: got %s (%s), want ended (lease_ended)", got.State, got.EndReason)
	}
	if !got.EndedAt.Equal(rec.LeaseEndsAt) {
		t.Errorf("ended at %v, want the deadline %v", got.EndedAt, rec.LeaseEndsAt)
	}
	if n := r.be.destroys(rec.ID); n != 1 {
		t.Errorf("backend destroys: got %d, want 1", n)
	}
}

func TestPauseAtLeaseEndThenRetentionEnds(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Retention = time.Hour })
	rec := r.create(service.CreateRequest{TimeoutSeconds: 60, OnLeaseEnd: "pause"})
	r.clock.Advance(60 * time.Second)
	r.m.Reap(t.Context())
	got := r.consistent(rec.ID)
	if got.State != sandbox.StatePaused {
		t.Fatalf("at the lease's end: got %s, want paused", got.State)
	}
	wantRetention := rec.LeaseEndsAt.Add(time.Hour)
	if got.RetentionEndsAt == nil || !got.RetentionEndsAt.Equal(wantRetention) {
		t.Fatalf("retention ends at %v, want %v", got.RetentionEndsAt, wantRetention)
	}
	r.clock.Advance(time.Hour - time.Millisecond)
	r.m.Reap(t.Context())
	if got := r.consistent(rec.ID).State; got != sandbox.StatePaused {
		t.Fatalf("a millisecond before retention's end: got %s, want paused", got)
	}
	r.clock.Advance(time.Millisecond)
	r.m.Reap(t.Context())
	got = r.consistent(rec.ID)
	if got.State != sandbox.StateEnded || got.EndReason != sandbox.EndRetentionEnded {
		t.Fatalf("at retention's end: got %s (%s), want ended (retention_ended)", got.State, got.EndReason)
	}
	if n := r.be.destroys(rec.ID); n != 1 {
		t.Errorf("backend destroys (the checkpoint): got %d, want 1", n)
	}
}

// TestBillingForAKnownDuration checks the bill against figures worked out
// by hand from the price table, not from the code's formula.
func TestBillingForAKnownDuration(t *testing.T) {
	prices := billing.Prices{MemoryNanosPerGiBHour: 7_812_500, CPUNanosPerCPUHour: 24_375_000, StorageNanosPerGiBHour: 1_000_000}
	tests := []struct {
		name    string
		cpu     time.Duration
		wantCPU int64
		// 4 GiB for an hour at 7,812,500 a GiB-hour is 31,250,000; 90 s
		// of CPU at 24,375,000 a CPU-hour is 609,375.
		wantCost int64
	}{
		{"memory only", 0, 0, 31_250_000},
		{"with CPU time", 90 * time.Second, 90e9, 31_250_000 + 609_375},
	}
	for _, tt := range tests {
		// In a bubble (testing/synctest), so that the test can wait for
		// the pause's side effects to settle instead of polling for them.
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, func(c *Config) { c.Prices = &prices })
				rec := r.create(service.CreateRequest{MemoryMiB: 4096, TimeoutSeconds: 7200})
				r.clock.Advance(30 * time.Minute)
				r.be.setCPU(rec.ID, tt.cpu/3)
				r.m.Meter(t.Context())
				r.clock.Advance(30 * time.Minute)
				r.be.setCPU(rec.ID, tt.cpu)
				r.m.Meter(t.Context())
				u := r.record(rec.ID).Usage
				if u.AliveMs != 3_600_000 || u.CPUNs != tt.wantCPU || u.CostNanos != tt.wantCost {
					t.Fatalf("after an hour: got alive %d ms, cpu %d ns, cost %d nanos; want 3600000, %d, %d",
						u.AliveMs, u.CPUNs, u.CostNanos, tt.wantCPU, tt.wantCost)
				}
				if rows, _ := r.st.Usage(t.Context(), store.UsageFilter{Account: "acct"}); len(rows) != 1 || rows[0].CostNanos != tt.wantCost {
					t.Fatalf("ledger: got %+v, want one row of %d nanos", rows, tt.wantCost)
				}
				// Paused for an hour: 4 GiB kept at 1,000,000 a GiB-hour.
				if _, err := r.m.Pause(t.Context(), "acct", rec.ID); err != nil {
					t.Fatal(err)
				}
				r.clock.Advance(time.Hour)
				// A pass skips a sandbox whose lock is busy (here: the watcher
				// of the instance the pause closed, taking the lock to see
				// that it is no longer the sandbox's), to sample it at the
				// next pass: once the watcher is done, one pass samples it.
				synctest.Wait()
				r.m.Meter(t.Context())
				u = r.record(rec.ID).Usage
				if u.PausedMs != 3_600_000 || u.CostNanos != tt.wantCost+4_000_000 || u.AliveMs != 3_600_000 {
					t.Fatalf("after an hour paused: got paused %d ms, alive %d ms, cost %d; want 3600000, 3600000, %d",
						u.PausedMs, u.AliveMs, u.CostNanos, tt.wantCost+4_000_000)
				}
			})
		})
	}
}

func TestStartFailureLeavesNothing(t *testing.T) {
	r := newRig(t, nil)
	r.be.fail = func(op, id string) error {
		if op == "start" {
			return errors.New("runsc broke")
		}
		return nil
	}
	_, err := r.m.Create(t.Context(), "acct", "", service.CreateRequest{})
	if got, want := sandbox.KindOf(err), sandbox.KindInternal; got != want {
		t.Fatalf("got %v (kind %s), want %s", err, got, want)
	}
	if recs, _ := r.st.ListSandboxes(t.Context(), store.SandboxFilter{}); len(recs) != 0 {
		t.Errorf("records left: %d, want none", len(recs))
	}
	if n := r.be.count("destroy"); n != 1 {
		t.Errorf("backend destroys of what the start made: got %d, want 1", n)
	}
	if n := r.m.entryCount(); n != 0 {
		t.Errorf("manager entries left: got %d, want 0", n)
	}
}

// TestStoreFailureAfterABackendCall: when the record of a change cannot be
// written, nothing is left running unrecorded or billed at the wrong rate.
func TestStoreFailureAfterABackendCall(t *testing.T) {
	broken := errors.New("disk full")
	failState := func(s sandbox.State) func(*sandbox.Record) error {
		return func(rec *sandbox.Record) error {
			if rec.State == s {
				return broken
			}
			return nil
		}
	}
	tests := []struct {
		name string
		// paused makes the sandbox paused before the failure is armed.
		paused      bool
		fail        func(*sandbox.Record) error
		backendFail string // an operation the backend fails meanwhile
		op          func(r *rig, id string) error
		wantState   sandbox.State
		wantReason  sandbox.EndReason
	}{
		{
			name: "start recorded as running fails: destroyed",
			fail: failState(sandbox.StateRunning),
			op: func(r *rig, _ string) error {
				_, err := r.m.Create(r.t.Context(), "acct", "", service.CreateRequest{})
				return err
			},
		},
		{
			name: "pause not recorded: resumed, keeps running",
			fail: failState(sandbox.StatePaused),
			op: func(r *rig, id string) error {
				_, err := r.m.Pause(r.t.Context(), "acct", id)
				return err
			},
			wantState: sandbox.StateRunning,
		},
		{
			name: "pause not recorded, resume back fails: ended",
			fail: failState(sandbox.StatePaused), backendFail: "resume",
			op: func(r *rig, id string) error {
				_, err := r.m.Pause(r.t.Context(), "acct", id)
				return err
			},
			wantState: sandbox.StateEnded, wantReason: sandbox.EndError,
		},
		{
			name: "resume not recorded: paused again", paused: true,
			fail: failState(sandbox.StateRunning),
			op: func(r *rig, id string) error {
				_, err := r.m.Resume(r.t.Context(), "acct", id)
				return err
			},
			wantState: sandbox.StatePaused,
		},
		{
			name: "resume not recorded, pause back fails: ended", paused: true,
			fail: failState(sandbox.StateRunning), backendFail: "pause",
			op: func(r *rig, id string) error {
				_, err := r.m.Resume(r.t.Context(), "acct", id)
				return err
			},
			wantState: sandbox.StateEnded, wantReason: sandbox.EndError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			rec := r.create(service.CreateRequest{})
			if tt.paused {
				if _, err := r.m.Pause(t.Context(), "acct", rec.ID); err != nil {
					t.Fatal(err)
				}
			}
			r.st.setFailPut(tt.fail)
			if tt.backendFail != "" {
				r.be.fail = func(op, id string) error {
					if op == tt.backendFail {
						return errors.New("backend broke too")
					}
					return nil
				}
			}
			err := tt.op(r, rec.ID)
			if got := sandbox.KindOf(err); got != sandbox.KindInternal {
				t.Fatalf("got %v (kind %s), want internal", err, got)
			}
			r.st.setFailPut(nil)
			if tt.wantState == "" {
				// The create: no box of any sandbox but the first runs.
				if n := r.be.count("start"); n != 2 {
					t.Fatalf("starts: got %d, want 2", n)
				}
				recs, _ := r.st.ListSandboxes(t.Context(), store.SandboxFilter{States: []sandbox.State{sandbox.StateRunning}})
				if len(recs) != 1 || recs[0].ID != rec.ID {
					t.Fatalf("running records: got %d, want the first sandbox only", len(recs))
				}
				for _, o := range recs {
					r.consistent(o.ID)
				}
				r.m.mu.Lock()
				live := len(r.m.live)
				r.m.mu.Unlock()
				if live != 1 {
					t.Fatalf("admitted sandboxes: got %d, want 1", live)
				}
				return
			}
			got := r.consistent(rec.ID)
			if got.State != tt.wantState || got.EndReason != tt.wantReason {
				t.Fatalf("got %s (%q), want %s (%q)", got.State, got.EndReason, tt.wantState, tt.wantReason)
			}
		})
	}
}

// TestStopWhenTheStoreFails: the sandbox is destroyed even though its end
// cannot be recorded, and a second stop records it.
func TestStopWhenTheStoreFails(t *testing.T) {
	r := newRig(t, nil)
	rec := r.create(service.CreateRequest{})
	r.st.setFailPut(func(*sandbox.Record) error { return errors.New("disk full") })
	if _, err := r.m.Stop(t.Context(), "acct", rec.ID); err == nil {
		t.Fatal("Stop with a broken store: got nil error, want one")
	}
	if got := r.be.state(rec.ID); got != "" {
		t.Fatalf("on the backend after the stop: got %q, want nothing", got)
	}
	r.st.setFailPut(nil)
	got, err := r.m.Stop(t.Context(), "acct", rec.ID)
	if err != nil || got.State != sandbox.StateEnded || got.EndReason != sandbox.EndStopped {
		t.Fatalf("second stop: got %+v, %v; want ended (stopped)", got, err)
	}
	r.consistent(rec.ID)
}
