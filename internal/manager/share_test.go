package manager

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// shareRig is a manager over the embedded store and the fake backend (see
// fakeBackend for what it does not prove) on a host of 8 vCPUs, 16 GiB
// and 100 GiB of free disk, without overcommit; run recovers, as a
// server's start does.
type shareRig struct {
	t   *testing.T
	st  *store.Bolt
	be  *fakeBackend
	cfg Config
}

func newShareRig(t *testing.T, config func(*Config)) *shareRig {
	t.Helper()
	st := storetest.OpenBolt(t)
	clock := &fakeClock{t: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)}
	r := &shareRig{t: t, st: st, be: newFakeBackend(), cfg: Config{
		Store: st, Now: clock.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HostCPUs: 8, HostMemoryMiB: 16384, Overcommit: 1,
		DiskFree: func() (int64, error) { return 100 << 30, nil },
	}}
	r.cfg.Backend = r.be
	if config != nil {
		config(&r.cfg)
	}
	for _, a := range []store.Account{
		{ID: "trial-1", TrialSeconds: 50 * 3600, Concurrency: 3},
		{ID: "trial-2", TrialSeconds: 50 * 3600, Concurrency: 3},
		{ID: "trial-3", TrialSeconds: 50 * 3600, Concurrency: 3},
		{ID: "paying"},
		{ID: "other"},
		{ID: "default"},
	} {
		a.Name, a.CreatedAt = a.ID, clock.Now()
		if err := st.CreateAccount(t.Context(), a); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// run starts a manager over the rig's store and backend, as a server's
// start does (New, then Recover).
func (r *shareRig) run() *Manager {
	r.t.Helper()
	m, err := New(r.cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(m.Close)
	if err := m.Recover(r.t.Context()); err != nil {
		r.t.Fatal(err)
	}
	return m
}

// sized is a create of vcpus and memoryMiB, with the default disk (10 GiB).
func sized(vcpus, memoryMiB int) service.CreateRequest {
	return service.CreateRequest{VCPUs: vcpus, MemoryMiB: memoryMiB}
}

// refusedFor fails unless err is capacity_exhausted naming want.
func refusedFor(t *testing.T, what string, err error, want string) {
	t.Helper()
	if got := sandbox.KindOf(err); got != sandbox.KindCapacityExhausted {
		t.Fatalf("%s: got %v (kind %s), want %s", what, err, got, sandbox.KindCapacityExhausted)
	}
	if msg := sandbox.MessageOf(err); !strings.Contains(msg, want) {
		t.Errorf("%s: message %q does not say %q", what, msg, want)
	}
}

// TestTrialHostShare: trial accounts together hold at most half of the
// host (the default share); past it a trial's create is refused while
// other accounts still create, and a restart, which counts the sandboxes
// again from the store, keeps the share.
func TestTrialHostShare(t *testing.T) {
	r := newShareRig(t, nil)
	m := r.run()
	ctx := t.Context()
	// Half of 8 vCPUs and 16 GiB: two trial sandboxes of 2 vCPUs, 4 GiB.
	var trials []*sandbox.Record
	for _, acct := range []string{"trial-1", "trial-2"} {
		rec, err := m.Create(ctx, acct, "", sized(2, 4096))
		if err != nil {
			t.Fatalf("%s's create within the trials' share: got %v, want created", acct, err)
		}
		trials = append(trials, rec)
	}
	for _, c := range []struct {
		acct string
		req  service.CreateRequest
	}{
		{"trial-3", sized(1, 512)},  // a third trial, the smallest size
		{"trial-1", sized(1, 512)},  // one that holds a sandbox already
		{"trial-3", sized(2, 4096)}, // the default size
	} {
		_, err := m.Create(ctx, c.acct, "", c.req)
		refusedFor(t, c.acct+" past the trials' share", err, "trial accounts is full")
	}
	// The host has room, and other accounts take it.
	paying, err := m.Create(ctx, "paying", "", sized(2, 4096))
	if err != nil {
		t.Fatalf("a paying account's create while the trials' share is full: got %v, want created", err)
	}

	// A restart counts the trials' sandboxes again from the store.
	m.Close()
	m = r.run()
	_, err = m.Create(ctx, "trial-3", "", sized(1, 512))
	refusedFor(t, "a trial's create after a restart", err, "trial accounts is full")
	if _, err := m.Create(ctx, "other", "", sized(1, 1024)); err != nil {
		t.Fatalf("another account's create after a restart: got %v, want created", err)
	}

	// A trial's sandbox that ends makes room for another trial's.
	if _, err := m.Stop(ctx, "trial-1", trials[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "trial-3", "", sized(2, 4096)); err != nil {
		t.Fatalf("a trial's create once another trial's sandbox stopped: got %v, want created", err)
	}
	// The host is full now (2+2+2+1 vCPUs of 8): a paying account gets
	// the host's refusal, not the trials'.
	_, err = m.Create(ctx, "paying", "", sized(2, 4096))
	refusedFor(t, "a create past the host", err, "this host is full")
	if _, err := m.Stop(ctx, "paying", paying.ID); err != nil {
		t.Fatal(err)
	}
}

// TestTrialHostShareDisk: the share bounds disk quotas too, each resource
// on its own.
func TestTrialHostShareDisk(t *testing.T) {
	r := newShareRig(t, func(c *Config) {
		c.TrialHostShare = 0.25
		c.HostCPUs, c.HostMemoryMiB = 64, 1<<20 // only disk is short
	})
	m := r.run()
	ctx := t.Context()
	// A quarter of 100 GiB free is 25 GiB: two trial sandboxes of 10 GiB.
	for _, acct := range []string{"trial-1", "trial-2"} {
		if _, err := m.Create(ctx, acct, "", sized(1, 512)); err != nil {
			t.Fatalf("%s: got %v, want created", acct, err)
		}
	}
	_, err := m.Create(ctx, "trial-3", "", sized(1, 512))
	refusedFor(t, "a trial's third 10 GiB quota", err, "20480 of 25600 MiB of disk")
	five := 5
	if _, err := m.Create(ctx, "trial-3", "", service.CreateRequest{VCPUs: 1, MemoryMiB: 512, DiskGiB: &five}); err != nil {
		t.Fatalf("a trial's 5 GiB quota within the share: got %v, want created", err)
	}
}

// TestTrialHostShareClaimsPool: a trial that takes a warm pool member is
// held to the trials' share as a cold create is, and a refused member
// goes back to its pool for others.
func TestTrialHostShareClaimsPool(t *testing.T) {
	r := newShareRig(t, func(c *Config) { c.Pools = []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 3}} })
	m := r.run()
	ctx := t.Context()
	waitReady := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for m.pools.counts()[defaultKey] != n {
			if time.Now().After(deadline) {
				t.Fatalf("pool: %d ready after 10s, want %d", m.pools.counts()[defaultKey], n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitReady(3)
	warm := map[string]bool{}
	m.pools.mu.Lock()
	for _, mem := range m.pools.ready[defaultKey] {
		warm[mem.id] = true
	}
	m.pools.mu.Unlock()
	// The three idle members hold 6 of the 8 vCPUs; none is a trial's.
	for _, acct := range []string{"trial-1", "trial-2"} {
		rec, err := m.Create(ctx, acct, "", sized(2, 4096))
		if err != nil {
			t.Fatalf("%s: got %v, want created", acct, err)
		}
		if !warm[rec.ID] {
			t.Errorf("%s's sandbox %s: not a warm member, want one of %v", acct, rec.ID, warm)
		}
	}
	_, err := m.Create(ctx, "trial-3", "", sized(2, 4096))
	refusedFor(t, "a trial's claim past the trials' share", err, "trial accounts is full")
	if _, err := m.Create(ctx, "paying", "", sized(2, 4096)); err != nil {
		t.Fatalf("a paying account's create: got %v, want created", err)
	}
}

// TestAccountHostShare: with a share per account, no account but the
// admin key's holds more than it; the default (1) bounds none.
func TestAccountHostShare(t *testing.T) {
	r := newShareRig(t, func(c *Config) { c.AccountHostShare = 0.25; c.AdminAccount = "default" })
	m := r.run()
	ctx := t.Context()
	if _, err := m.Create(ctx, "paying", "", sized(2, 4096)); err != nil {
		t.Fatalf("within its share: got %v, want created", err)
	}
	_, err := m.Create(ctx, "paying", "", sized(1, 512))
	refusedFor(t, "past its share", err, "account paying holds all of this host it may")
	if _, err := m.Create(ctx, "other", "", sized(2, 4096)); err != nil {
		t.Fatalf("another account within its share: got %v, want created", err)
	}
	if _, err := m.Create(ctx, "default", "", sized(4, 8192)); err != nil {
		t.Fatalf("the admin key's account past the share: got %v, want created", err)
	}

	r2 := newShareRig(t, nil)
	m2 := r2.run()
	if _, err := m2.Create(ctx, "paying", "", sized(8, 16384)); err != nil {
		t.Fatalf("one account filling the host by default: got %v, want created", err)
	}
}

func TestHostShareValidate(t *testing.T) {
	for _, c := range []struct {
		trial, account float64
		ok             bool
	}{
		{0, 0, true}, {0.5, 1, true}, {1, 0.1, true},
		{-0.1, 0, false}, {1.5, 0, false}, {0, -1, false}, {0, 2, false},
	} {
		cfg := Config{Backend: newFakeBackend(), Store: storetest.OpenBolt(t), TrialHostShare: c.trial, AccountHostShare: c.account}
		cfg.setDefaults()
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("trial share %g, account share %g: got %v, want ok %v", c.trial, c.account, err, c.ok)
		}
	}
}
