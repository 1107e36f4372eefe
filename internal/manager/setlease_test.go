package manager

import (
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// SetLease puts the deadline at now+N even when that is sooner, and the
// reaper ends the sandbox by the new deadline.
func TestSetLeaseShortens(t *testing.T) {
	r := newRig(t, nil)
	rec := r.create(service.CreateRequest{TimeoutSeconds: 600})
	r.clock.Advance(10 * time.Second)
	got, err := r.m.SetLease(t.Context(), "acct", rec.ID, 30*time.Second)
	if err != nil {
		t.Fatalf("SetLease 30s: %v", err)
	}
	if want := r.clock.Now().Add(30 * time.Second); !got.LeaseEndsAt.Equal(want) {
		t.Fatalf("SetLease 30s: got the deadline %v, want %v", got.LeaseEndsAt, want)
	}
	r.clock.Advance(time.Minute)
	r.m.Reap(t.Context())
	if st := r.consistent(rec.ID).State; st != sandbox.StateEnded {
		t.Fatalf("a minute after SetLease 30s: got %s, want ended", st)
	}
	if _, err := r.m.SetLease(t.Context(), "acct", rec.ID, time.Minute); err == nil {
		t.Errorf("SetLease of an ended sandbox: got %v, want an error", err)
	}
}
