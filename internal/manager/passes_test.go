package manager

import (
	"context"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// TestPassesDoNotWaitOnABusySandbox: a long operation on one sandbox (a
// pause whose agent stalls, say) holds its lock; the reaper's and the
// meter's passes still end and bill the others at once, and reach the
// busy one once it is free.
func TestPassesDoNotWaitOnABusySandbox(t *testing.T) {
	r := newRig(t, nil)
	busy := r.create(service.CreateRequest{TimeoutSeconds: 60})
	other := r.create(service.CreateRequest{TimeoutSeconds: 60})
	release := make(chan struct{})
	r.be.mu.Lock()
	r.be.fail = func(op, id string) error {
		if op == "pause" && id == busy.ID {
			<-release
		}
		return nil
	}
	r.be.mu.Unlock()
	paused := make(chan error, 1)
	go func() {
		_, err := r.m.Pause(context.Background(), "acct", busy.ID)
		paused <- err
	}()
	// The pause holds busy's lock once the backend is called.
	for r.be.count("pause") == 0 {
		time.Sleep(time.Millisecond)
	}
	r.clock.Advance(time.Minute)

	passes := make(chan struct{})
	go func() {
		r.m.Meter(context.Background())
		r.m.Reap(context.Background())
		close(passes)
	}()
	select {
	case <-passes:
	case <-time.After(10 * time.Second):
		t.Fatal("the meter and reaper passes waited on the busy sandbox")
	}
	if got := r.record(other.ID); got.State != sandbox.StateEnded || got.EndReason != sandbox.EndLeaseEnded {
		t.Fatalf("the other sandbox: got %s (%s), want ended (lease_ended)", got.State, got.EndReason)
	}
	close(release)
	if err := <-paused; err != nil {
		t.Fatalf("pause: %v", err)
	}
	// Paused before its lease was reaped: the waiting reap finds nothing due.
	r.m.wg.Wait()
	if got := r.consistent(busy.ID).State; got != sandbox.StatePaused {
		t.Fatalf("busy sandbox: got %s, want paused", got)
	}
}
