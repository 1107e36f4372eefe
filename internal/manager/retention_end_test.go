package manager

import (
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// TestEndRetentionOfAnotherNodesSharedCheckpoint: a live node ends a
// paused shared checkpoint of another node retention_ended once its
// retention is over (the failure detector's ask when that node is lost),
// removing it; before then, or for a running sandbox, it refuses.
func TestEndRetentionOfAnotherNodesSharedCheckpoint(t *testing.T) {
	shared := func(c *Config) { c.SharedCheckpoints, c.NodeCompat = true, "runsc-1/avx2" }
	r := nodeRig(t, shared)
	ctx := t.Context()
	running := r.create(service.CreateRequest{})
	rec := r.create(service.CreateRequest{})
	paused, err := r.m.Pause(ctx, "acct", rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	n2 := r.peer("n2", r.be, shared)

	if _, err := n2.EndRetention(ctx, rec.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("retention not over: got %v, want conflict", err)
	}
	if got := r.record(rec.ID); got.State != sandbox.StatePaused || r.be.state(rec.ID) == "" {
		t.Fatalf("refused, the sandbox is %s with checkpoint %q; want paused, kept", got.State, r.be.state(rec.ID))
	}
	if _, err := r.m.EndRetention(ctx, running.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("a running sandbox: got %v, want conflict", err)
	}

	r.clock.Advance(paused.RetentionEndsAt.Sub(r.clock.Now()) + 1)
	ended, err := n2.EndRetention(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ended.State != sandbox.StateEnded || ended.EndReason != sandbox.EndRetentionEnded {
		t.Errorf("got %s %s, want ended retention_ended", ended.State, ended.EndReason)
	}
	if st := r.be.state(rec.ID); st != "" {
		t.Errorf("after the end the checkpoint is still %s", st)
	}
	if got := r.record(running.ID); got.State != sandbox.StateRunning {
		t.Errorf("the running sandbox: got %s, want running", got.State)
	}
}
