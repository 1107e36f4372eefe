package node

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// DefaultLeaseTTL is how long a renewal keeps the node's entry alive
// (withruntime node --node-lease).
const DefaultLeaseTTL = 15 * time.Second

// Registry is the part of the store the lease loop uses.
type Registry interface {
	RegisterNode(ctx context.Context, n *store.Node, ttl time.Duration) error
	RenewNode(ctx context.Context, id string, epoch int64, load store.NodeLoad, ttl time.Duration) (*store.Node, error)
}

// Manager is what the lease loop asks of the node's manager.
type Manager interface {
	// Load is what admission holds now, reported at each renewal.
	Load() store.NodeLoad
	// Fence freezes every live sandbox and refuses work until Unfence.
	Fence(ctx context.Context) error
	// Unfence thaws the sandboxes whose records are still this node's and
	// destroys the others, then serves again.
	Unfence(ctx context.Context) error
	// DropUnowned destroys the local sandboxes whose records say they
	// ended or belong to another node.
	DropUnowned(ctx context.Context) error
	// EndAll destroys every local sandbox and ends its record with reason.
	EndAll(ctx context.Context, reason sandbox.EndReason) error
	// SetNodeEpoch is told the epoch of each registration, before the
	// node serves under it: the records the manager makes live carry it.
	SetNodeEpoch(epoch int64)
}

// Clock is the lease loop's time: Now must carry the monotonic reading
// (time.Now does), so that a step of the wall clock moves no deadline.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// LeaseConfig configures a Lease.
type LeaseConfig struct {
	// Node is the entry to register: ID, Addr, capacity, Compat and the
	// isolations the node runs (placement sends a create only where its
	// isolation runs).
	Node     store.Node
	Registry Registry
	Manager  Manager
	// TTL is the lease's length (DefaultLeaseTTL when 0).
	TTL    time.Duration
	Clock  Clock // real time when nil
	Logger *slog.Logger
}

// Lease keeps the node's entry in the store alive: it renews every TTL/5
// with the manager's load, fences the node when no renewal has succeeded
// for TTL/2 and unfences it when one does again. The store's lease runs
// TTL from when the store recorded a renewal, which is after the renewal
// request started, the moment the node counts from: so the node is fenced
// before any failure detector can give up on it, and no sandbox runs on
// two nodes at once.
//
// The fence is kept by a timer of its own (Run's watcher), not by the
// renewals: whatever the loop is blocked in (a store call that hangs, as
// one over a link that drops packets does for minutes), the node fences on
// time. The loop's own store work (DropUnowned, Unfence, EndAll) is cut
// short at the fence deadline.
type Lease struct {
	cfg LeaseConfig

	mu     sync.Mutex // guards epoch, fenced and lastOK
	epoch  int64
	fenced bool
	// lastOK is when the last successful renewal (or registration)
	// started, with its monotonic reading; only the loop sets it.
	lastOK time.Time
	// moved tells the watcher that lastOK moved (buffered, 1).
	moved chan struct{}

	// fenceMu orders the manager's Fence and Unfence: a freeze still
	// under way must not cross a thaw, or a sandbox would stay frozen on
	// a node that serves. The watcher takes it only while the node is not
	// fenced, which Unfence never runs in: so an Unfence that hangs never
	// holds up a fence.
	fenceMu sync.Mutex
}

// NewLease returns the lease loop of cfg.Node; Register starts it.
func NewLease(cfg LeaseConfig) *Lease {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Lease{cfg: cfg, moved: make(chan struct{}, 1)}
}

// Epoch is the node's epoch of its current registration.
func (l *Lease) Epoch() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// Fenced reports whether the node is fenced.
func (l *Lease) Fenced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenced
}

// deadline is when the node must be fenced unless a renewal succeeds.
func (l *Lease) deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastOK.Add(l.cfg.TTL / 2)
}

func (l *Lease) setLastOK(t time.Time) {
	l.mu.Lock()
	l.lastOK = t
	l.mu.Unlock()
	select {
	case l.moved <- struct{}{}:
	default:
	}
}

// untilFence bounds ctx at the fence deadline: store work that would run
// past it is of no use, since the node is fenced by then.
func (l *Lease) untilFence(ctx context.Context) (context.Context, context.CancelFunc) {
	// A duration from Now, not a wall-clock deadline: Now and lastOK
	// carry monotonic readings.
	return context.WithTimeout(ctx, l.deadline().Sub(l.cfg.Clock.Now()))
}

// Register enters the node in the store with a new epoch, and tells the
// manager the epoch, which it stamps on the records it makes live.
func (l *Lease) Register(ctx context.Context) error {
	start := l.cfg.Clock.Now()
	n := l.cfg.Node
	n.Load = l.cfg.Manager.Load()
	if err := l.cfg.Registry.RegisterNode(ctx, &n, l.cfg.TTL); err != nil {
		return err
	}
	l.cfg.Manager.SetNodeEpoch(n.Epoch)
	l.mu.Lock()
	l.epoch = n.Epoch
	l.mu.Unlock()
	l.setLastOK(start)
	l.cfg.Logger.Info("node registered", "node", n.ID, "epoch", n.Epoch, "addr", n.Addr, "lease", l.cfg.TTL)
	return nil
}

// Run renews the lease until ctx ends, and fences the node on time
// whatever the renewals do. Register must have succeeded.
func (l *Lease) Run(ctx context.Context) {
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		l.watch(ctx)
	}()
	defer func() { <-watched }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.cfg.Clock.After(l.cfg.TTL / 5):
		}
		l.renew(ctx)
	}
}

// watch fences the node at the fence deadline, re-armed whenever a
// renewal moves it.
func (l *Lease) watch(ctx context.Context) {
	for {
		wait := l.deadline().Sub(l.cfg.Clock.Now())
		if wait <= 0 {
			l.checkFence(ctx)
			select { // fenced: nothing to do until a renewal succeeds
			case <-ctx.Done():
				return
			case <-l.moved:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-l.moved:
		case <-l.cfg.Clock.After(wait):
		}
	}
}

// checkFence fences the node if the deadline has passed and it is not
// fenced yet.
func (l *Lease) checkFence(ctx context.Context) {
	if l.Fenced() {
		return // Unfence may be running, holding fenceMu: leave it be
	}
	l.fenceMu.Lock()
	defer l.fenceMu.Unlock()
	l.mu.Lock()
	since := l.cfg.Clock.Now().Sub(l.lastOK)
	due := !l.fenced && since >= l.cfg.TTL/2
	if due {
		l.fenced = true
	}
	l.mu.Unlock()
	if !due {
		return
	}
	l.cfg.Logger.Error("node fenced: no lease renewal succeeded", "node", l.cfg.Node.ID, "for", since)
	if err := l.cfg.Manager.Fence(ctx); err != nil {
		l.cfg.Logger.Error("fencing the node", "node", l.cfg.Node.ID, "err", err)
	}
}

// renew makes one renewal and acts on its outcome.
func (l *Lease) renew(ctx context.Context) {
	ttl, id := l.cfg.TTL, l.cfg.Node.ID
	start := l.cfg.Clock.Now()
	// A renewal that hangs must not keep the loop: it may take until the
	// fence is due, and at least TTL/5.
	rctx, cancel := context.WithTimeout(ctx, max(l.deadline().Sub(start), ttl/5))
	_, err := l.cfg.Registry.RenewNode(rctx, id, l.Epoch(), l.cfg.Manager.Load(), ttl)
	cancel()
	switch {
	case ctx.Err() != nil:
		return // closing
	case err == nil:
		l.setLastOK(start)
		if l.Fenced() && !l.unfence(ctx) {
			return // still fenced; the next renewal tries again
		}
		dctx, cancel := l.untilFence(ctx)
		err := l.cfg.Manager.DropUnowned(dctx)
		cancel()
		if err != nil {
			l.cfg.Logger.Warn("dropping sandboxes this node no longer holds", "node", id, "err", err)
		}
	case errors.Is(err, store.ErrStale):
		l.lost(ctx, start)
	default:
		l.cfg.Logger.Warn("renewing the node's lease", "node", id, "err", err)
		l.checkFence(ctx)
	}
}

// unfence checks the node's sandboxes against the store and serves again,
// if that is done before the fence deadline. Cut short or late, the node
// stays fenced and Fence freezes again whatever the check thawed.
func (l *Lease) unfence(ctx context.Context) bool {
	id := l.cfg.Node.ID
	l.fenceMu.Lock()
	defer l.fenceMu.Unlock()
	uctx, cancel := l.untilFence(ctx)
	err := l.cfg.Manager.Unfence(uctx)
	cancel()
	l.mu.Lock()
	ok := err == nil && l.cfg.Clock.Now().Before(l.lastOK.Add(l.cfg.TTL/2))
	if ok {
		l.fenced = false
	}
	l.mu.Unlock()
	if ok {
		l.cfg.Logger.Info("node unfenced: the store answers again", "node", id)
		return true
	}
	if err == nil {
		err = errors.New("the check ran past the fence deadline")
	}
	l.cfg.Logger.Error("unfencing the node", "node", id, "err", err)
	if ctx.Err() == nil {
		if err := l.cfg.Manager.Fence(ctx); err != nil {
			l.cfg.Logger.Error("fencing the node again", "node", id, "err", err)
		}
	}
	return false
}

// lost handles the store's word that this epoch was declared lost: what
// the node held is not its any more. Every local sandbox ends, and the
// node comes back as a new epoch with nothing. start is when the renewal
// that was told so started: the store answered then, and the work here is
// bounded as the renewal's would be.
func (l *Lease) lost(ctx context.Context, start time.Time) {
	id := l.cfg.Node.ID
	l.fenceMu.Lock()
	l.mu.Lock()
	was := l.fenced
	l.fenced = true
	l.mu.Unlock()
	if !was {
		if err := l.cfg.Manager.Fence(ctx); err != nil {
			l.cfg.Logger.Error("fencing the node", "node", id, "err", err)
		}
	}
	l.fenceMu.Unlock()
	l.cfg.Logger.Error("node was declared lost: ending its sandboxes and registering again", "node", id, "epoch", l.Epoch())
	bound := max(start.Add(l.cfg.TTL/2).Sub(l.cfg.Clock.Now()), l.cfg.TTL/5)
	ectx, cancel := context.WithTimeout(ctx, bound)
	err := l.cfg.Manager.EndAll(ectx, sandbox.EndNodeLost)
	cancel()
	if err != nil {
		l.cfg.Logger.Error("ending the sandboxes of a lost node", "node", id, "err", err)
		return // fenced; the next renewal is stale again and retries
	}
	rctx, cancel := context.WithTimeout(ctx, l.cfg.TTL/5)
	err = l.Register(rctx)
	cancel()
	if err != nil {
		l.cfg.Logger.Error("registering the node again", "node", id, "err", err)
		return
	}
	l.unfence(ctx)
}
