package manager

import (
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// An extend asks for "at least N more seconds": the deadline becomes the
// later of the current one and now+N, never earlier.
func TestExtendNeverShortensTheLease(t *testing.T) {
	r := newRig(t, nil)
	rec := r.create(service.CreateRequest{TimeoutSeconds: 600})
	deadline := rec.LeaseEndsAt

	r.clock.Advance(10 * time.Second)
	got, err := r.m.Extend(t.Context(), "acct", rec.ID, 30*time.Second)
	if err != nil {
		t.Fatalf("Extend 30s: %v", err)
	}
	if !got.LeaseEndsAt.Equal(deadline) {
		t.Fatalf("extend 30s of a lease with 590s left: got the deadline %v, want it kept at %v", got.LeaseEndsAt, deadline)
	}
	if stored := r.record(rec.ID).LeaseEndsAt; !stored.Equal(deadline) {
		t.Fatalf("stored deadline after extend 30s: got %v, want %v", stored, deadline)
	}
	// Past the 30 s asked for, the sandbox still runs: the reaper goes by
	// the kept deadline.
	r.clock.Advance(time.Minute)
	r.m.Reap(t.Context())
	if st := r.consistent(rec.ID).State; st != sandbox.StateRunning {
		t.Fatalf("a minute after extend 30s: got %s, want running", st)
	}

	got, err = r.m.Extend(t.Context(), "acct", rec.ID, time.Hour)
	if err != nil {
		t.Fatalf("Extend 1h: %v", err)
	}
	if want := r.clock.Now().Add(time.Hour); !got.LeaseEndsAt.Equal(want) {
		t.Fatalf("extend 1h: got the deadline %v, want %v", got.LeaseEndsAt, want)
	}
}

// The max_cost check is what it was: against the lease asked for, so an
// extend asking for more than the budget allows is refused even when it
// would not move the deadline.
func TestExtendChecksMaxCostOfTheLeaseAskedFor(t *testing.T) {
	prices := billing.Prices{MemoryNanosPerGiBHour: 7_812_500, CPUNanosPerCPUHour: 24_375_000}
	r := newRig(t, func(c *Config) { c.Prices = &prices })
	req := service.CreateRequest{VCPUs: 2, MemoryMiB: 4096, TimeoutSeconds: 600}
	budget := prices.MaxLease(req.VCPUs, req.MemoryMiB, 10*time.Minute)/1000 + 1 // micros: 10 minutes fit, a day does not
	req.MaxCostMicros = &budget
	rec := r.create(req)
	if _, err := r.m.Extend(t.Context(), "acct", rec.ID, 30*time.Second); err != nil {
		t.Fatalf("Extend 30s within max_cost: %v", err)
	}
	_, err := r.m.Extend(t.Context(), "acct", rec.ID, 24*time.Hour)
	if sandbox.KindOf(err) != sandbox.KindMaxCost {
		t.Fatalf("Extend 24h past max_cost: got %v, want a max_cost error", err)
	}
	if got := r.record(rec.ID).LeaseEndsAt; !got.Equal(rec.LeaseEndsAt) {
		t.Fatalf("deadline after a refused extend: got %v, want %v", got, rec.LeaseEndsAt)
	}
}
