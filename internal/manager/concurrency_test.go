package manager

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// Parallel lifecycle calls on one sandbox (issue 8, item 7). The fake
// backend takes a few milliseconds per call and, like gVisor, kills what
// runs under an id when a resume of it fails: unserialized calls overlap
// and destroy the winner, serialized ones cannot.

const parallel = 16

// race runs op from parallel goroutines at once and returns their errors.
func race(op func() error) []error {
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, parallel)
	for i := range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = op()
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// tally counts successes and fails the test on any error but a conflict.
func tally(t *testing.T, errs []error) (ok int) {
	t.Helper()
	for _, err := range errs {
		switch k := sandbox.KindOf(err); {
		case err == nil:
			ok++
		case k == sandbox.KindConflict:
		default:
			t.Errorf("got %v (kind %s), want success or conflict", err, k)
		}
	}
	return ok
}

func TestParallelResumesOneWinner(t *testing.T) {
	r := newRig(t, nil)
	r.be.delay = 3 * time.Millisecond
	rec := r.create(service.CreateRequest{})
	if _, err := r.m.Pause(t.Context(), "acct", rec.ID); err != nil {
		t.Fatal(err)
	}
	ok := tally(t, race(func() error {
		_, err := r.m.Resume(context.Background(), "acct", rec.ID)
		return err
	}))
	if ok != 1 {
		t.Fatalf("successful resumes: got %d, want exactly 1", ok)
	}
	if got := r.consistent(rec.ID).State; got != sandbox.StateRunning {
		t.Fatalf("after the resumes: got %s, want running", got)
	}
	if n := r.be.count("resume"); n != 1 {
		t.Errorf("backend resumes: got %d, want 1 (the others saw it running and stopped short)", n)
	}
	if n := r.be.destroys(rec.ID); n != 0 {
		t.Errorf("backend destroys of the winner: got %d, want 0", n)
	}
	if _, err := r.m.Agent(t.Context(), "acct", rec.ID); err != nil {
		t.Errorf("Agent after the resumes: got %v, want the transport", err)
	}
}

func TestParallelPausesOneWinner(t *testing.T) {
	r := newRig(t, nil)
	r.be.delay = 3 * time.Millisecond
	rec := r.create(service.CreateRequest{})
	ok := tally(t, race(func() error {
		_, err := r.m.Pause(context.Background(), "acct", rec.ID)
		return err
	}))
	if ok != 1 {
		t.Fatalf("successful pauses: got %d, want exactly 1", ok)
	}
	if got := r.consistent(rec.ID).State; got != sandbox.StatePaused {
		t.Fatalf("after the pauses: got %s, want paused", got)
	}
	if n := r.be.count("pause"); n != 1 {
		t.Errorf("backend pauses: got %d, want 1", n)
	}
}

func TestParallelStopsDestroyOnce(t *testing.T) {
	r := newRig(t, nil)
	rec := r.create(service.CreateRequest{})
	errs := race(func() error {
		got, err := r.m.Stop(context.Background(), "acct", rec.ID)
		if err == nil && (got.State != sandbox.StateEnded || got.EndReason != sandbox.EndStopped) {
			return fmt.Errorf("stop answered %s (%s)", got.State, got.EndReason)
		}
		return err
	})
	// Stopping an ended sandbox answers it as it is: every stop succeeds,
	// and one of them did the work.
	if ok := tally(t, errs); ok != parallel {
		t.Fatalf("successful stops: got %d, want %d", ok, parallel)
	}
	r.consistent(rec.ID)
	if n := r.be.destroys(rec.ID); n != 1 {
		t.Errorf("backend destroys: got %d, want 1", n)
	}
}

func TestParallelExtendsAllHold(t *testing.T) {
	r := newRig(t, nil)
	rec := r.create(service.CreateRequest{TimeoutSeconds: 60})
	if ok := tally(t, race(func() error {
		_, err := r.m.Extend(context.Background(), "acct", rec.ID, time.Hour)
		return err
	})); ok != parallel {
		t.Fatalf("successful extends: got %d, want %d", ok, parallel)
	}
	got := r.consistent(rec.ID)
	if want := r.clock.Now().Add(time.Hour); !got.LeaseEndsAt.Equal(want) {
		t.Errorf("lease ends at %v, want %v", got.LeaseEndsAt, want)
	}
}

// TestParallelMixedOperations throws every lifecycle call at one sandbox
// at once, with the reaper, the meter and a crash of the instance in the
// middle: no call fails but by conflict, and at the end the record, the
// manager and the backend agree.
func TestParallelMixedOperations(t *testing.T) {
	for round := range 20 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			r := newRig(t, nil)
			r.be.delay = time.Millisecond
			rec := r.create(service.CreateRequest{TimeoutSeconds: 60, OnLeaseEnd: "pause"})
			ctx := context.Background()
			ops := []func() error{
				func() error { _, err := r.m.Resume(ctx, "acct", rec.ID); return err },
				func() error { _, err := r.m.Pause(ctx, "acct", rec.ID); return err },
				func() error { _, err := r.m.Extend(ctx, "acct", rec.ID, time.Minute); return err },
				func() error { _, err := r.m.SetNetwork(ctx, "acct", rec.ID, sandbox.Network{}); return err },
				func() error { _, err := r.m.Agent(ctx, "acct", rec.ID); return err },
				func() error { r.m.Meter(ctx); return nil },
				func() error { r.m.Reap(ctx); return nil },
			}
			if round%4 == 3 {
				ops = append(ops, func() error { r.be.crash(rec.ID, sandbox.EndOutOfMemory); return nil })
			}
			if round%2 == 1 {
				ops = append(ops, func() error { _, err := r.m.Stop(ctx, "acct", rec.ID); return err })
			}
			if round%3 == 2 {
				r.clock.Advance(time.Minute) // the reaper pauses it meanwhile
			}
			var i int
			var mu sync.Mutex
			tally(t, race(func() error {
				mu.Lock()
				op := ops[i%len(ops)]
				i++
				mu.Unlock()
				err := op()
				if sandbox.KindOf(err) == sandbox.KindLeaseEnded {
					return nil // a crash ended it: an honest answer
				}
				return err
			}))
			got := r.consistent(rec.ID)
			if got.State == sandbox.StateRunning && r.be.destroys(rec.ID) != 0 {
				t.Errorf("running, but the backend destroyed it %d times", r.be.destroys(rec.ID))
			}
			r.m.mu.Lock()
			entries, live := len(r.m.entries), len(r.m.live)
			r.m.mu.Unlock()
			if entries != live {
				t.Errorf("manager entries: got %d, want %d (one per live sandbox, no leak)", entries, live)
			}
		})
	}
}

// TestLocksOfIdsNotLiveAreForgotten: calls on paused, ended and unknown
// ids leave no entry behind.
func TestLocksOfIdsNotLiveAreForgotten(t *testing.T) {
	r := newRig(t, nil)
	ctx := t.Context()
	paused := r.create(service.CreateRequest{})
	if _, err := r.m.Pause(ctx, "acct", paused.ID); err != nil {
		t.Fatal(err)
	}
	ended := r.create(service.CreateRequest{})
	if _, err := r.m.Stop(ctx, "acct", ended.ID); err != nil {
		t.Fatal(err)
	}
	running := r.create(service.CreateRequest{})
	for i := range 1000 {
		for _, id := range []string{paused.ID, ended.ID, fmt.Sprintf("sbxnope%d", i)} {
			r.m.Extend(ctx, "acct", id, time.Minute)
			r.m.Pause(ctx, "acct", id)
			r.m.Stop(ctx, "other", id)
		}
	}
	r.m.Meter(ctx)
	r.m.Reap(ctx)
	r.settled(ended.ID)
	if n := r.m.entryCount(); n != 1 {
		t.Fatalf("manager entries: got %d, want 1 (the running %s)", n, running.ID)
	}
}

// TestAgentDuringResumeAndPause is for -race: Agent reads the transport
// that resume's attach writes and pause's release clears.
func TestAgentDuringResumeAndPause(t *testing.T) {
	r := newRig(t, nil)
	r.be.delay = 2 * time.Millisecond
	rec := r.create(service.CreateRequest{})
	ctx := context.Background()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := r.m.Agent(ctx, "acct", rec.ID); err != nil && sandbox.KindOf(err) != sandbox.KindConflict {
					t.Errorf("Agent: got %v, want the transport or a conflict", err)
				}
			}
		}()
	}
	for range 10 {
		if _, err := r.m.Pause(ctx, "acct", rec.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := r.m.Resume(ctx, "acct", rec.ID); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	r.consistent(rec.ID)
}
