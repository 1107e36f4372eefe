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
	// Node is the entry to register: ID, Addr, capacity and Compat.
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
type Lease struct {
	cfg LeaseConfig

	mu     sync.Mutex // guards epoch and fenced, which the RPC reads
	epoch  int64
	fenced bool

	// lastOK is when the last successful renewal (or registration)
	// started; only the loop touches it.
	lastOK time.Time
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
	return &Lease{cfg: cfg}
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

func (l *Lease) setFenced(f bool) {
	l.mu.Lock()
	l.fenced = f
	l.mu.Unlock()
}

// Register enters the node in the store with a new epoch.
func (l *Lease) Register(ctx context.Context) error {
	start := l.cfg.Clock.Now()
	n := l.cfg.Node
	n.Load = l.cfg.Manager.Load()
	if err := l.cfg.Registry.RegisterNode(ctx, &n, l.cfg.TTL); err != nil {
		return err
	}
	l.mu.Lock()
	l.epoch = n.Epoch
	l.mu.Unlock()
	l.lastOK = start
	l.cfg.Logger.Info("node registered", "node", n.ID, "epoch", n.Epoch, "addr", n.Addr, "lease", l.cfg.TTL)
	return nil
}

// Run renews the lease until ctx ends. Register must have succeeded.
func (l *Lease) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.cfg.Clock.After(l.cfg.TTL / 5):
		}
		l.renew(ctx)
	}
}

// renew makes one renewal and acts on its outcome.
func (l *Lease) renew(ctx context.Context) {
	ttl, id := l.cfg.TTL, l.cfg.Node.ID
	start := l.cfg.Clock.Now()
	// A renewal that hangs must not keep the node from fencing: it may
	// take until the fence is due, and at least TTL/5.
	rctx, cancel := context.WithTimeout(ctx, max(l.lastOK.Add(ttl/2).Sub(start), ttl/5))
	_, err := l.cfg.Registry.RenewNode(rctx, id, l.Epoch(), l.cfg.Manager.Load(), ttl)
	cancel()
	switch {
	case ctx.Err() != nil:
		return // closing
	case err == nil:
		l.lastOK = start
		if l.Fenced() {
			if err := l.cfg.Manager.Unfence(ctx); err != nil {
				l.cfg.Logger.Error("unfencing the node", "node", id, "err", err)
				return // still fenced; the next renewal tries again
			}
			l.setFenced(false)
			l.cfg.Logger.Info("node unfenced: the store answers again", "node", id)
		}
		if err := l.cfg.Manager.DropUnowned(ctx); err != nil {
			l.cfg.Logger.Warn("dropping sandboxes this node no longer holds", "node", id, "err", err)
		}
	case errors.Is(err, store.ErrStale):
		l.lost(ctx)
	default:
		l.cfg.Logger.Warn("renewing the node's lease", "node", id, "err", err)
		if !l.Fenced() && l.cfg.Clock.Now().Sub(l.lastOK) >= ttl/2 {
			l.setFenced(true)
			l.cfg.Logger.Error("node fenced: no lease renewal succeeded", "node", id, "for", l.cfg.Clock.Now().Sub(l.lastOK))
			if err := l.cfg.Manager.Fence(ctx); err != nil {
				l.cfg.Logger.Error("fencing the node", "node", id, "err", err)
			}
		}
	}
}

// lost handles the store's word that this epoch was declared lost: what
// the node held is not its any more. Every local sandbox ends, and the
// node comes back as a new epoch with nothing.
func (l *Lease) lost(ctx context.Context) {
	id := l.cfg.Node.ID
	l.setFenced(true)
	l.cfg.Logger.Error("node was declared lost: ending its sandboxes and registering again", "node", id, "epoch", l.Epoch())
	if err := l.cfg.Manager.EndAll(ctx, sandbox.EndNodeLost); err != nil {
		l.cfg.Logger.Error("ending the sandboxes of a lost node", "node", id, "err", err)
		return // fenced; the next renewal is stale again and retries
	}
	if err := l.Register(ctx); err != nil {
		l.cfg.Logger.Error("registering the node again", "node", id, "err", err)
		return
	}
	if err := l.cfg.Manager.Unfence(ctx); err != nil {
		l.cfg.Logger.Error("unfencing the node", "node", id, "err", err)
		return
	}
	l.setFenced(false)
}
