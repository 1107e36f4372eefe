package manager

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// The lifecycle suite's rig: a manager on a fake clock, the embedded store
// in a temp dir (behind a wrapper that fails on demand) and the fake
// backend. It is the unit tier; see fakeBackend for what it does not prove.

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// flakyStore is the embedded store whose record writes fail while failPut
// says so.
type flakyStore struct {
	*store.Bolt
	mu      sync.Mutex
	failPut func(r *sandbox.Record) error
}

func (s *flakyStore) setFailPut(f func(r *sandbox.Record) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failPut = f
}

func (s *flakyStore) check(r *sandbox.Record) error {
	s.mu.Lock()
	f := s.failPut
	s.mu.Unlock()
	if f != nil {
		return f(r)
	}
	return nil
}

func (s *flakyStore) PutSandbox(ctx context.Context, r *sandbox.Record) error {
	if err := s.check(r); err != nil {
		return err
	}
	return s.Bolt.PutSandbox(ctx, r)
}

func (s *flakyStore) RecordUsage(ctx context.Context, r *sandbox.Record, d store.UsageDelta) error {
	if err := s.check(r); err != nil {
		return err
	}
	return s.Bolt.RecordUsage(ctx, r, d)
}

type rig struct {
	t     *testing.T
	m     *Manager
	be    *fakeBackend
	st    *flakyStore
	clock *fakeClock
}

func newRig(t *testing.T, config func(*Config)) *rig {
	t.Helper()
	r := &rig{
		t:     t,
		be:    newFakeBackend(),
		st:    &flakyStore{Bolt: storetest.OpenBolt(t)},
		clock: &fakeClock{t: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)},
	}
	cfg := Config{
		Backend: r.be, Store: r.st, Now: r.clock.Now,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		HostCPUs: 64, HostMemoryMiB: 1 << 20,
		DiskFree: func() (int64, error) { return 1 << 50, nil },
	}
	if config != nil {
		config(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	r.m = m
	return r
}

// create makes a sandbox of the account "acct" or fails the test.
func (r *rig) create(req service.CreateRequest) *sandbox.Record {
	r.t.Helper()
	rec, err := r.m.Create(r.t.Context(), "acct", "", req)
	if err != nil {
		r.t.Fatalf("Create: %v", err)
	}
	return rec
}

// record reads the stored record.
func (r *rig) record(id string) *sandbox.Record {
	r.t.Helper()
	rec, err := r.st.GetSandbox(context.Background(), id)
	if err != nil {
		r.t.Fatalf("GetSandbox %s: %v", id, err)
	}
	return rec
}

// live reports whether the manager holds resources for id, and whether it
// has an instance there.
func (r *rig) live(id string) (admitted, attached bool) {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	e := r.m.live[id]
	return e != nil, e != nil && e.inst != nil
}

// settled waits until no lifecycle call holds or awaits id's lock (the
// watcher of an ended instance may still be on its way).
func (r *rig) settled(id string) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.m.mu.Lock()
		e := r.m.entries[id]
		busy := e != nil && e.refs > 0
		r.m.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("sandbox %s: its lock is still held after 10s", id)
		}
		time.Sleep(time.Millisecond)
	}
}

// consistent fails the test unless the record, the manager and the
// backend agree on what id is.
func (r *rig) consistent(id string) *sandbox.Record {
	r.t.Helper()
	r.settled(id)
	rec := r.record(id)
	admitted, attached := r.live(id)
	onBackend := r.be.state(id)
	want := map[sandbox.State]struct {
		admitted, attached bool
		backend            sandbox.State
	}{
		sandbox.StateRunning: {true, true, sandbox.StateRunning},
		sandbox.StatePaused:  {false, false, sandbox.StatePaused},
		sandbox.StateEnded:   {false, false, ""},
	}[rec.State]
	if admitted != want.admitted || attached != want.attached || onBackend != want.backend {
		r.t.Fatalf("sandbox %s is %s in its record, but admitted %v (want %v), attached %v (want %v), on the backend %q (want %q)",
			id, rec.State, admitted, want.admitted, attached, want.attached, onBackend, want.backend)
	}
	return rec
}
