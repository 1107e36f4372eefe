package manager

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// The pool's unit tier, on the fake backend (see fakeBackend for what it
// does not prove); test/e2e runs pools on gVisor.

var defaultKey = poolKey{vcpus: 2, memoryMiB: 4096}

// poolRig is a rig with pools, recovered so that the filler runs.
func poolRig(t *testing.T, pools []Pool, config func(*Config)) *rig {
	t.Helper()
	r := newRig(t, func(c *Config) {
		c.Pools = pools
		if config != nil {
			config(c)
		}
	})
	if err := r.m.Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitPool waits until the pool of key has n members ready.
func (r *rig) waitPool(key poolKey, n int) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.m.pools.counts()[key] != n {
		if time.Now().After(deadline) {
			r.t.Fatalf("pool %v: %d ready after 10s, want %d", key, r.m.pools.counts()[key], n)
		}
		time.Sleep(time.Millisecond)
	}
}

// members lists the ids ready in key's pool.
func (r *rig) members(key poolKey) map[string]bool {
	r.m.pools.mu.Lock()
	defer r.m.pools.mu.Unlock()
	ids := map[string]bool{}
	for _, mem := range r.m.pools.ready[key] {
		ids[mem.id] = true
	}
	return ids
}

func TestPoolClaimsUnderConcurrency(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 3}}, nil)
	r.waitPool(defaultKey, 3)
	warm := r.members(defaultKey)
	startsBefore := r.be.count("start")

	const n = 8
	var wg sync.WaitGroup
	ids := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec, err := r.m.Create(context.Background(), "acct", "", service.CreateRequest{})
			if err != nil {
				t.Errorf("Create: %v", err)
				return
			}
			ids <- rec.ID
		}()
	}
	wg.Wait()
	close(ids)
	seen, fromPool := map[string]bool{}, 0
	for id := range ids {
		if seen[id] {
			t.Errorf("sandbox %s handed out twice", id)
		}
		seen[id] = true
		if warm[id] {
			fromPool++
		}
		if rec := r.consistent(id); rec.State != sandbox.StateRunning {
			t.Errorf("%s: state %s, want running", id, rec.State)
		}
	}
	if fromPool != 3 {
		t.Errorf("%d of %d creates took a warm member, want 3 (the pool's size)", fromPool, n)
	}
	// The rest started cold; the refills are starts too, so at least.
	if cold := r.be.count("start") - startsBefore; cold < n-3 {
		t.Errorf("%d starts after the pool was warm, want at least %d cold ones", cold, n-3)
	}
	// The pool refills behind the claims, with sandboxes nobody had.
	r.waitPool(defaultKey, 3)
	for id := range r.members(defaultKey) {
		if seen[id] || warm[id] {
			t.Errorf("refilled member %s was handed out or pooled before", id)
		}
	}
}

func TestPoolClaimIsBilledFromTheClaim(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 1}}, nil)
	r.waitPool(defaultKey, 1)
	var id string
	for id = range r.members(defaultKey) {
	}
	r.be.setCPU(id, 3*time.Second) // the boot's CPU: nobody's
	r.clock.Advance(10 * time.Minute)
	claimed := r.m.now()

	rec := r.create(service.CreateRequest{TimeoutSeconds: 60})
	if rec.ID != id {
		t.Fatalf("create got %s, want the warm %s", rec.ID, id)
	}
	if !rec.CreatedAt.Equal(claimed) || rec.StartedAt == nil || !rec.StartedAt.Equal(claimed) {
		t.Errorf("created %v, started %v: want both at the claim, %v", rec.CreatedAt, rec.StartedAt, claimed)
	}
	if !rec.LeaseEndsAt.Equal(claimed.Add(time.Minute)) {
		t.Errorf("lease ends %v, want a minute after the claim", rec.LeaseEndsAt)
	}
	r.be.setCPU(id, 3*time.Second+500*time.Millisecond)
	r.clock.Advance(2 * time.Second)
	r.m.Meter(t.Context())
	got := r.record(id).Usage
	if got.AliveMs != 2000 || got.CPUNs != int64(500*time.Millisecond) {
		t.Errorf("usage after 2 s and 0.5 s of CPU: alive %d ms, CPU %d ns; want 2000 ms and 5e8 ns (nothing of the boot)", got.AliveMs, got.CPUNs)
	}
}

func TestPoolMembersAreInvisible(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 2}, {VCPUs: 1, MemoryMiB: 1024, Size: 2}}, nil)
	r.waitPool(defaultKey, 2)
	r.waitPool(poolKey{vcpus: 1, memoryMiB: 1024}, 2)
	recs, err := r.st.ListSandboxes(t.Context(), store.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Errorf("the store holds %d records with only pool members running, want none", len(recs))
	}
	// A member counts toward no account's concurrency.
	r2 := r.m
	rec, err := r2.Create(t.Context(), "acct", "", service.CreateRequest{VCPUs: 1, MemoryMiB: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Create(t.Context(), "other", "", service.CreateRequest{VCPUs: 1, MemoryMiB: 1024}); err != nil {
		t.Fatalf("a second account's create: %v", err)
	}
	if rec.Spec.VCPUs != 1 || rec.Spec.MemoryMiB != 1024 {
		t.Errorf("claimed spec %+v, want the create's size", rec.Spec)
	}
}

func TestPoolConcurrencyRefusalKeepsTheMember(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 2}}, func(c *Config) { c.DefaultConcurrency = 1 })
	r.waitPool(defaultKey, 2)
	r.create(service.CreateRequest{})
	r.waitPool(defaultKey, 2)
	before := r.members(defaultKey)
	_, err := r.m.Create(t.Context(), "acct", "", service.CreateRequest{})
	if sandbox.KindOf(err) != sandbox.KindConcurrency {
		t.Fatalf("a create past the account's limit: got %v, want concurrency_limit_reached", err)
	}
	after := r.members(defaultKey)
	if len(after) != 2 {
		t.Errorf("%d members after a refused claim, want 2", len(after))
	}
	for id := range before {
		if !after[id] {
			t.Errorf("member %s lost by a refused claim", id)
		}
	}
}

func TestPoolMaxAge(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 2}}, func(c *Config) { c.PoolMaxAge = time.Hour })
	r.waitPool(defaultKey, 2)
	old := r.members(defaultKey)
	r.clock.Advance(time.Hour + time.Second)
	r.m.pools.kick()
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := r.members(defaultKey)
		fresh := len(now) == 2
		for id := range now {
			fresh = fresh && !old[id]
		}
		if fresh {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members %v after the maximum age, want two new ones (old: %v)", now, old)
		}
		time.Sleep(time.Millisecond)
	}
	for id := range old {
		if r.be.state(id) != "" {
			t.Errorf("retired member %s still on the backend", id)
		}
	}
}

func TestPoolFullHostDegradesToColdStarts(t *testing.T) {
	// In a bubble (testing/synctest): the filler's ticks and backoffs run
	// on its clock, and synctest.Wait says when the filler has nothing
	// left to do, so that "it did not overfill" is not a guess at a sleep.
	synctest.Test(t, func(t *testing.T) {
		// 2 CPUs at overcommit 4: room for four 2-vCPU sandboxes, all of
		// them pool members once the pool is warm.
		r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 4}}, func(c *Config) { c.HostCPUs, c.Overcommit = 2, 4 })
		r.waitPool(defaultKey, 4)
		// A size with no pool: a member is destroyed to make room.
		cold := r.create(service.CreateRequest{VCPUs: 2, MemoryMiB: 2048})
		if r.m.pools.counts()[defaultKey] != 3 {
			t.Errorf("%d members after an eviction, want 3", r.m.pools.counts()[defaultKey])
		}
		// Three claims, then the pool cannot refill (the host is full): the
		// next create is refused only now, with nothing idle left.
		for range 3 {
			r.create(service.CreateRequest{})
		}
		if _, err := r.m.Create(t.Context(), "acct", "", service.CreateRequest{}); sandbox.KindOf(err) != sandbox.KindCapacityExhausted {
			t.Fatalf("a create on a full host with no idle member: got %v, want capacity_exhausted", err)
		}
		if n := r.m.pools.counts()[defaultKey]; n != 0 {
			t.Errorf("%d members on a full host, want 0", n)
		}
		// Room comes free: the pool refills into it, and only into it.
		if _, err := r.m.Stop(t.Context(), "acct", cold.ID); err != nil {
			t.Fatal(err)
		}
		r.m.pools.unblockAll()
		r.m.pools.kick()
		r.waitPool(defaultKey, 1)
		// Two ticks of the filler later, each of which unblocks the pool
		// and tries again, and with the filler idle: still one.
		time.Sleep(2 * fillTick)
		synctest.Wait()
		if n := r.m.pools.counts()[defaultKey]; n != 1 {
			t.Errorf("%d members in the room of one, want 1", n)
		}
	})
}

func TestPoolRestartSweepsMembers(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 2}}, nil)
	r.waitPool(defaultKey, 2)
	left := r.members(defaultKey)
	// A second server on the same backend and store, as after a crash
	// of the first (whose Close never ran).
	m2, err := New(Config{
		Backend: r.be, Store: r.st, Now: r.clock.Now, Logger: r.m.cfg.Logger,
		HostCPUs: 64, HostMemoryMiB: 1 << 20, DiskFree: r.m.cfg.DiskFree,
		Pools: []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if err := m2.Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	for id := range left {
		if r.be.state(id) != "" {
			t.Errorf("the dead server's member %s survived the sweep", id)
		}
	}
	rec, err := m2.Create(t.Context(), "acct", "", service.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if left[rec.ID] {
		t.Errorf("the new server handed out %s, a member of the dead one", rec.ID)
	}
}

func TestPoolCloseDestroysIdleMembers(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 2}}, nil)
	r.waitPool(defaultKey, 2)
	kept := r.create(service.CreateRequest{})
	r.waitPool(defaultKey, 2)
	r.m.Close()
	ids := r.be.ids()
	if len(ids) != 1 || ids[0] != kept.ID {
		t.Errorf("the backend holds %v after Close, want only the claimed %s", ids, kept.ID)
	}
}

func TestPoolSkipsSpecsItCannotServe(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 1}}, nil)
	r.waitPool(defaultKey, 1)
	warm := r.members(defaultKey)
	one := 1
	for _, req := range []service.CreateRequest{
		{VCPUs: 1, MemoryMiB: 4096},
		{DiskGiB: &one},
	} {
		rec := r.create(req)
		if warm[rec.ID] {
			t.Errorf("create %+v took the member of another shape", req)
		}
	}
}

func TestPoolMemberThatDiedIsNotHandedOut(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 1}}, nil)
	r.waitPool(defaultKey, 1)
	var id string
	for id = range r.members(defaultKey) {
	}
	r.be.crash(id, sandbox.EndError)
	r.settled(id)
	rec := r.create(service.CreateRequest{})
	if rec.ID == id {
		t.Fatalf("create got %s, a member that died", id)
	}
	r.consistent(rec.ID)
}

func TestPoolClaimRestoresPriority(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 2}}, nil)
	r.waitPool(defaultKey, 2)
	for id := range r.members(defaultKey) {
		if !r.be.lowPriority(id) {
			t.Errorf("member %s was not started warm", id)
		}
	}
	rec := r.create(service.CreateRequest{})
	if r.be.lowPriority(rec.ID) {
		t.Errorf("claimed %s still runs at the warm priority", rec.ID)
	}
}

func TestPoolFailedClaimStartsCold(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   string // the backend call that fails during the claim
	}{{"priority", "claim"}, {"cpu counter", "cputime"}} {
		t.Run(tc.name, func(t *testing.T) {
			r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 1}}, nil)
			r.waitPool(defaultKey, 1)
			var warm string
			for warm = range r.members(defaultKey) {
			}
			r.be.mu.Lock()
			r.be.fail = func(op, id string) error {
				if op == tc.op && id == warm {
					return errors.New("injected")
				}
				return nil
			}
			r.be.mu.Unlock()
			rec := r.create(service.CreateRequest{})
			if rec.ID == warm {
				t.Fatalf("create got %s, the member whose claim failed", warm)
			}
			r.consistent(rec.ID)
			r.settled(warm)
			if r.be.state(warm) != "" {
				t.Errorf("the member whose claim failed is still on the backend")
			}
			if admitted, _ := r.live(warm); admitted {
				t.Errorf("the member whose claim failed still holds room")
			}
			if _, err := r.st.GetSandbox(t.Context(), warm); err == nil {
				t.Errorf("the member whose claim failed has a record")
			}
		})
	}
}

func TestPoolNotEvictedForACreateThatCannotFit(t *testing.T) {
	// 8 vCPUs of room: a user's 4 and two idle members' 4. A create of
	// 8 cannot fit even with both members gone: they stay.
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 2}}, func(c *Config) { c.HostCPUs, c.Overcommit = 2, 4 })
	r.waitPool(defaultKey, 2)
	r.create(service.CreateRequest{VCPUs: 4, MemoryMiB: 1024})
	if _, err := r.m.Create(t.Context(), "acct", "", service.CreateRequest{VCPUs: 8, MemoryMiB: 1024}); sandbox.KindOf(err) != sandbox.KindCapacityExhausted {
		t.Fatalf("a create that cannot fit: got %v, want capacity_exhausted", err)
	}
	if n := r.m.pools.counts()[defaultKey]; n != 2 {
		t.Errorf("%d members after a create that could not fit, want 2 (none evicted for nothing)", n)
	}
}

// TestPoolSkipsVolumes: a create that mounts volumes boots its own
// sandbox (a member booted without them), leaving the pool's members.
func TestPoolSkipsVolumes(t *testing.T) {
	r := poolRig(t, []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 1}}, func(c *Config) {
		c.Backend = namedFake{c.Backend.(*fakeBackend), sandbox.IsolationGVisor} // volumes are gVisor's
	})
	r.waitPool(defaultKey, 1)
	members := r.members(defaultKey)
	rec := r.create(service.CreateRequest{VCPUs: 2, MemoryMiB: 4096, Volumes: []sandbox.VolumeMount{{ID: "vol_0123456789abcdef", Name: "d", Path: "/d", HostDir: "/run/x"}}})
	if members[rec.ID] {
		t.Fatalf("the create with a volume took pool member %s", rec.ID)
	}
	if got := r.members(defaultKey); len(got) != 1 || !maps.Equal(got, members) {
		t.Fatalf("pool after the create: %v, want %v", got, members)
	}
}
