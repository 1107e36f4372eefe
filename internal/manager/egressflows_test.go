package manager

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// egressCalls is an EgressState that records what the manager asks of it.
type egressCalls struct {
	mu    sync.Mutex // guards calls
	calls []string
}

func (e *egressCalls) Events(string) []egress.Event { return nil }
func (e *egressCalls) Release(id string)            { e.add("release " + id) }
func (e *egressCalls) CloseFlows(id string)         { e.add("close " + id) }

func (e *egressCalls) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, s)
}

func (e *egressCalls) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.calls
	e.calls = nil
	return c
}

// TestEgressClosedWhenNotRunning: whenever a sandbox stops running, its
// proxied connections are closed; a pause keeps what egress knows of it
// (CloseFlows), an end forgets it (Release).
func TestEgressClosedWhenNotRunning(t *testing.T) {
	eg := &egressCalls{}
	r := newRig(t, func(c *Config) { c.EgressState = eg })
	rec := r.create(service.CreateRequest{})
	id := rec.ID
	want := func(what string, calls ...string) {
		t.Helper()
		r.settled(id)
		if got := eg.take(); !slices.Equal(got, calls) {
			t.Errorf("%s: got egress calls %q, want %q", what, got, calls)
		}
	}
	want("running")

	if _, err := r.m.Pause(t.Context(), "acct", id); err != nil {
		t.Fatal(err)
	}
	want("paused", "close "+id)

	if _, err := r.m.Resume(t.Context(), "acct", id); err != nil {
		t.Fatal(err)
	}
	want("resumed")

	// A resume that cannot be recorded is paused again.
	if _, err := r.m.Pause(t.Context(), "acct", id); err != nil {
		t.Fatal(err)
	}
	eg.take()
	r.st.setFailPut(func(rec *sandbox.Record) error {
		if rec.State == sandbox.StateRunning {
			return errors.New("disk full")
		}
		return nil
	})
	if _, err := r.m.Resume(t.Context(), "acct", id); err == nil {
		t.Fatal("a resume that could not be recorded succeeded")
	}
	r.st.setFailPut(nil)
	if got := r.consistent(id).State; got != sandbox.StatePaused {
		t.Fatalf("after the failed resume: %s, want paused", got)
	}
	want("paused again", "close "+id)

	if _, err := r.m.Stop(t.Context(), "acct", id); err != nil {
		t.Fatal(err)
	}
	want("ended", "release "+id)
}
