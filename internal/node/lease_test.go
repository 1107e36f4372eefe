package node

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(time.Duration) <-chan time.Time { return nil } // the tests step by hand

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// flakyRegistry is a real store whose renewals fail while down is set, as
// when the store cannot be reached.
type flakyRegistry struct {
	store.Store
	mu   sync.Mutex
	down bool
}

func (f *flakyRegistry) setDown(d bool) {
	f.mu.Lock()
	f.down = d
	f.mu.Unlock()
}

func (f *flakyRegistry) RenewNode(ctx context.Context, id string, epoch int64, load store.NodeLoad, ttl time.Duration) (*store.Node, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return nil, errors.New("dial tcp: connection refused")
	}
	return f.Store.RenewNode(ctx, id, epoch, load, ttl)
}

func newLease(t *testing.T, ttl time.Duration) (*Lease, *flakyRegistry, *fakeManager, *fakeClock) {
	t.Helper()
	st := storetest.OpenBolt(t)
	t.Cleanup(func() { st.Close() })
	reg := &flakyRegistry{Store: st}
	mgr := &fakeManager{}
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	l := NewLease(LeaseConfig{
		Node: store.Node{ID: testNode, Addr: "127.0.0.1:7900", CPUs: 4, MemoryMiB: 8192, Overcommit: 4, Compat: "c1",
			Isolations: []string{sandbox.IsolationMicroVM, sandbox.IsolationGVisor}},
		Registry: reg, Manager: mgr, TTL: ttl, Clock: clock,
	})
	if err := l.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l, reg, mgr, clock
}

// The node fences once no renewal has succeeded for TTL/2, not before,
// and unfences at the first renewal that succeeds again; each success
// drops what the node no longer holds.
func TestLeaseFencesAndUnfences(t *testing.T) {
	ctx := context.Background()
	ttl := time.Hour // the store's lease must not run out under the test
	l, reg, mgr, clock := newLease(t, ttl)

	clock.advance(ttl / 5)
	l.renew(ctx)
	if l.Fenced() || !slices.Equal(mgr.Calls(), []string{"drop"}) {
		t.Fatalf("after a renewal: got fenced %v calls %q, want serving and one drop", l.Fenced(), mgr.Calls())
	}
	n, err := reg.GetNode(ctx, testNode)
	if err != nil || n.Load.VCPUs != 2 || n.Load.Sandboxes != 1 {
		t.Fatalf("got node %+v %v, want the manager's load recorded", n, err)
	}

	reg.setDown(true)
	clock.advance(ttl / 5) // 1/5 since the last success
	l.renew(ctx)
	clock.advance(ttl / 5) // 2/5
	l.renew(ctx)
	if l.Fenced() {
		t.Fatalf("fenced %v after 2/5 of the lease without renewals, want serving until 1/2", ttl*2/5)
	}
	clock.advance(ttl / 10) // 1/2
	l.renew(ctx)
	if !l.Fenced() {
		t.Fatal("not fenced after half the lease without renewals")
	}
	clock.advance(ttl / 5)
	l.renew(ctx) // still down: no second fence
	if got, want := mgr.Calls(), []string{"drop", "fence"}; !slices.Equal(got, want) {
		t.Fatalf("got calls %q, want %q", got, want)
	}

	reg.setDown(false)
	clock.advance(ttl / 5)
	l.renew(ctx)
	if l.Fenced() {
		t.Fatal("still fenced after a renewal succeeded")
	}
	if got, want := mgr.Calls(), []string{"drop", "fence", "unfence", "drop"}; !slices.Equal(got, want) {
		t.Fatalf("got calls %q, want %q", got, want)
	}
}

// A node told that its epoch was declared lost ends every sandbox it has
// (node_lost), registers again as a new epoch and serves.
func TestLeaseLostRegistersAgain(t *testing.T) {
	// In a bubble (testing/synctest): the store's lease runs out on its
	// clock, at once and exactly, instead of being polled for.
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ttl := 50 * time.Millisecond
		l, reg, mgr, _ := newLease(t, ttl)
		if l.Epoch() != 1 {
			t.Fatalf("got epoch %d, want 1", l.Epoch())
		}
		// A detector gives up on the node once its lease has run out: after
		// its TTL on the bubble's clock, which the store reads.
		time.Sleep(ttl)
		if ok, err := reg.MarkNodeLost(ctx, testNode, 1); err != nil || !ok {
			t.Fatalf("marking the node lost once its lease ran out: got %v, %v; want it marked", ok, err)
		}
		l.renew(ctx)
		// Frozen first: ending them all may be cut short.
		if got, want := mgr.Calls(), []string{"fence", "endall " + string(sandbox.EndNodeLost), "unfence"}; !slices.Equal(got, want) {
			t.Fatalf("got calls %q, want %q", got, want)
		}
		n, err := reg.GetNode(ctx, testNode)
		if err != nil {
			t.Fatal(err)
		}
		if n.Epoch != 2 || n.Lost || l.Epoch() != 2 || l.Fenced() {
			t.Fatalf("got entry epoch %d lost %v, lease epoch %d fenced %v; want epoch 2, not lost, serving", n.Epoch, n.Lost, l.Epoch(), l.Fenced())
		}
		// Placement reads the isolations off the entry of every epoch.
		if want := []string{sandbox.IsolationMicroVM, sandbox.IsolationGVisor}; !slices.Equal(n.Isolations, want) {
			t.Fatalf("isolations of the new epoch's entry: got %v, want %v", n.Isolations, want)
		}
		// The manager stamps records with the epoch they went live under.
		if got, want := mgr.Epochs(), []int64{1, 2}; !slices.Equal(got, want) {
			t.Fatalf("got epochs handed to the manager %v, want %v", got, want)
		}
	})
}

// Run renews on its own, every TTL/5.
func TestLeaseRunRenews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := storetest.OpenBolt(t)
		defer st.Close()
		mgr := &fakeManager{}
		l := NewLease(LeaseConfig{Node: store.Node{ID: testNode, Addr: "x:1"}, Registry: st, Manager: mgr, TTL: 100 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		if err := l.Register(ctx); err != nil {
			t.Fatal(err)
		}
		first, err := st.GetNode(ctx, testNode)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { l.Run(ctx); close(done) }()
		// One TTL on the bubble's clock is five renewals' time; then Run is
		// idle until its next one.
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if !slices.Contains(mgr.Calls(), "drop") {
			t.Errorf("calls after a TTL of Run: %q, want the drop of a renewal", mgr.Calls())
		}
		cancel()
		<-done
		n, err := st.GetNode(context.Background(), testNode)
		if err != nil {
			t.Fatal(err)
		}
		if !n.RenewedAt.After(first.RenewedAt) || l.Fenced() {
			t.Fatalf("got renewed at %v (registered %v), fenced %v: want a renewal by Run", n.RenewedAt, first.RenewedAt, l.Fenced())
		}
	})
}

// hangingStore is a real store some of whose calls block until their
// context ends, as PostgreSQL's do over a link that drops packets.
type hangingStore struct {
	store.Store
	mu   sync.Mutex
	hang map[string]bool // method name -> its calls hang
}

func (h *hangingStore) set(method string, hang bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hang == nil {
		h.hang = map[string]bool{}
	}
	h.hang[method] = hang
}

func (h *hangingStore) wait(ctx context.Context, method string) error {
	h.mu.Lock()
	hang := h.hang[method]
	h.mu.Unlock()
	if !hang {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *hangingStore) RenewNode(ctx context.Context, id string, epoch int64, load store.NodeLoad, ttl time.Duration) (*store.Node, error) {
	if err := h.wait(ctx, "RenewNode"); err != nil {
		return nil, err
	}
	return h.Store.RenewNode(ctx, id, epoch, load, ttl)
}

func (h *hangingStore) GetSandbox(ctx context.Context, id string) (*sandbox.Record, error) {
	if err := h.wait(ctx, "GetSandbox"); err != nil {
		return nil, err
	}
	return h.Store.GetSandbox(ctx, id)
}

func newHangingLease(t *testing.T, ttl time.Duration) (*Lease, *hangingStore, *fakeManager) {
	t.Helper()
	st := storetest.OpenBolt(t)
	t.Cleanup(func() { st.Close() })
	hs := &hangingStore{Store: st}
	mgr := &fakeManager{st: hs}
	l := NewLease(LeaseConfig{Node: store.Node{ID: testNode, Addr: "x:1"}, Registry: hs, Manager: mgr, TTL: ttl})
	if err := l.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l, hs, mgr
}

// waitFor polls cond for a generous while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A store call that hangs after a renewal (the manager's reads in
// DropUnowned) keeps neither the node from fencing on time nor the loop
// from going on once the store answers again.
func TestLeaseFencesWhileAStoreCallHangs(t *testing.T) {
	// In a bubble (testing/synctest): the lease's timers run on its clock,
	// so that "on time" is a moment, not a poll.
	synctest.Test(t, func(t *testing.T) {
		ttl := time.Second
		l, hs, mgr := newHangingLease(t, ttl)
		hs.set("GetSandbox", true) // renewals work, the manager's reads hang
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { l.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		// The first renewal, at TTL/5, succeeds and its DropUnowned hangs:
		// the fence is due TTL/2 after that renewal.
		time.Sleep(ttl/5 + ttl/2)
		synctest.Wait()
		if !l.Fenced() {
			t.Fatal("not fenced TTL/2 after the last renewal while DropUnowned hangs")
		}
		if !slices.Contains(mgr.Calls(), "fence") {
			t.Fatalf("got calls %q, want a fence", mgr.Calls())
		}
		hs.set("GetSandbox", false)
		waitFor(t, "an unfence once the store answers", func() bool { return !l.Fenced() })
		if !mgr.Thawed() {
			t.Fatal("unfenced without the manager's Unfence")
		}
	})
}

// An Unfence cut short at the fence deadline (a record read that hangs)
// leaves the node fenced, and what it thawed frozen again.
func TestLeaseUnfenceCutShortStaysFenced(t *testing.T) {
	// In a bubble (testing/synctest): the hung calls' deadlines pass on
	// its clock, at once.
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l, hs, mgr := newHangingLease(t, 400*time.Millisecond)
		renew := func() {
			t.Helper()
			done := make(chan struct{})
			go func() { l.renew(ctx); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("a renewal never returned")
			}
		}

		hs.set("RenewNode", true)
		waitFor(t, "a fence while renewals hang", func() bool { renew(); return l.Fenced() })

		hs.set("RenewNode", false)
		hs.set("GetSandbox", true)
		renew()
		calls := mgr.Calls()
		if !l.Fenced() || mgr.Thawed() {
			t.Fatalf("after an Unfence cut short: got fenced %v, thawed %v; want fenced, nothing thawed", l.Fenced(), mgr.Thawed())
		}
		if got, want := calls[len(calls)-2:], []string{"unfence", "fence"}; !slices.Equal(got, want) {
			t.Fatalf("got calls %q, want them to end %q", calls, want)
		}

		hs.set("GetSandbox", false)
		renew()
		calls = mgr.Calls()
		if l.Fenced() || !slices.Equal(calls[len(calls)-2:], []string{"unfence", "drop"}) {
			t.Fatalf("once the store answers: got fenced %v, calls %q; want serving after unfence, drop", l.Fenced(), calls)
		}
	})
}
