package manager

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// TestBootBurstQueues: a burst of creates larger than the bound on
// concurrent boots queues rather than fails: every create succeeds, and at
// no time do more Starts than the bound run on the backend.
func TestBootBurstQueues(t *testing.T) {
	const bound, burst = 3, 12
	r := newRig(t, func(c *Config) { c.MaxConcurrentBoots = bound })
	// Each Start takes a while, so that the burst's would overlap. (Not in
	// a synctest bubble: the sandboxes' watchers wait on entry locks,
	// which would stop its clock.)
	r.be.delay = 30 * time.Millisecond
	var wg sync.WaitGroup
	errs := make([]error, burst)
	for i := range burst {
		wg.Go(func() {
			_, errs[i] = r.m.Create(t.Context(), "acct", "", service.CreateRequest{VCPUs: 1, MemoryMiB: 512})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("create %d of the burst: %v", i, err)
		}
	}
	if got := r.be.count("start"); got != burst {
		t.Errorf("starts: got %d, want %d", got, burst)
	}
	// The bound was never passed, and the burst did overlap (at least two
	// at once: the bound is not one boot at a time).
	if got := r.be.peakOf("start"); got > bound || got < 2 {
		t.Errorf("most starts under way at once: got %d, want 2 to %d", got, bound)
	}
}

// TestBootBoundCountsResumes: resumes take boot slots as starts do.
func TestBootBoundCountsResumes(t *testing.T) {
	const bound, n = 2, 6
	r := newRig(t, func(c *Config) { c.MaxConcurrentBoots = bound })
	ids := make([]string, n)
	for i := range ids {
		ids[i] = r.create(service.CreateRequest{VCPUs: 1, MemoryMiB: 512}).ID
		if _, err := r.m.Pause(t.Context(), "acct", ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	r.be.delay = 30 * time.Millisecond
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if _, err := r.m.Resume(t.Context(), "acct", id); err != nil {
				t.Errorf("resume %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	if got := r.be.peakOf("resume"); got > bound || got < 2 {
		t.Errorf("most resumes under way at once: got %d, want 2 to %d", got, bound)
	}
}

// TestBootWaitCancelled: a create waiting for a boot slot whose context
// ends returns the context's error and leaves nothing behind (no record,
// no sandbox on the backend, no slot taken); the create that held the
// slot is not disturbed.
func TestBootWaitCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(c *Config) { c.MaxConcurrentBoots = 1 })
		release := make(chan struct{})
		r.be.fail = func(op, id string) error {
			if op == "start" {
				<-release // holds the one boot slot
			}
			return nil
		}
		first := make(chan error, 1)
		go func() {
			_, err := r.m.Create(t.Context(), "acct", "", service.CreateRequest{})
			first <- err
		}()
		synctest.Wait() // the first create is in the backend's Start
		ctx, cancel := context.WithCancel(t.Context())
		second := make(chan error, 1)
		go func() {
			_, err := r.m.Create(ctx, "acct", "", service.CreateRequest{})
			second <- err
		}()
		synctest.Wait() // the second waits for the slot
		if got := r.be.count("start"); got != 1 {
			t.Fatalf("starts on the backend while one slot is held: got %d, want 1", got)
		}
		cancel()
		if err := <-second; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled create: got %v, want context.Canceled", err)
		}
		recs, err := r.st.ListSandboxes(t.Context(), store.SandboxFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 {
			t.Errorf("records after the cancelled create: got %d, want 1 (the first create's)", len(recs))
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatalf("the create that held the slot: %v", err)
		}
		if got := r.be.count("start"); got != 1 {
			t.Errorf("starts: got %d, want 1 (the cancelled create never reached the backend)", got)
		}
		r.m.mu.Lock()
		live, entries := len(r.m.live), len(r.m.entries)
		r.m.mu.Unlock()
		if live != 1 || entries != 1 {
			t.Errorf("the manager holds %d live and %d entries, want 1 and 1", live, entries)
		}
		// The cancelled waiter took no slot with it: the next create boots.
		r.be.fail = nil
		r.create(service.CreateRequest{})
	})
}

// TestMaxConcurrentBootsValidated: a bound below 1 is refused; none set
// takes the default.
func TestMaxConcurrentBootsValidated(t *testing.T) {
	r := newRig(t, nil)
	if got := r.m.cfg.MaxConcurrentBoots; got != DefaultMaxConcurrentBoots() {
		t.Errorf("MaxConcurrentBoots unset: got %d, want the default %d", got, DefaultMaxConcurrentBoots())
	}
	cfg := r.m.cfg
	cfg.MaxConcurrentBoots = -1
	if err := cfg.Validate(); err == nil {
		t.Error("MaxConcurrentBoots -1: got no error")
	}
}
