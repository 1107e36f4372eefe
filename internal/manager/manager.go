package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// Manager runs sandboxes on one host.
type Manager struct {
	cfg Config
	log *sandboxLogger
	// adapter is cfg.Backend in the adapter that answers for the
	// optional capabilities it lacks, its calls traced and its boots
	// bounded (backend.go).
	adapter *backendCalls

	// snapshotsBilled is when the reaper last billed snapshots (Unix
	// nanoseconds of the manager's clock): it lists them once a stretch,
	// not every tick.
	snapshotsBilled atomic.Int64

	// mu guards entries, live, byAddr, every entry's refs and the fields
	// the entry marks as guarded by it.
	mu      sync.Mutex
	entries map[string]*entry // every id live or being operated on
	live    map[string]*entry // the admitted ones: what admission counts
	// stats are the running sandboxes' metrics (stats.go).
	stats   statsStore
	byAddr  map[netip.Addr]*entry
	waiting map[string]bool // ids a background pass waits to lock (runLockedOrLater)
	pools   *pools
	// fenced is set while the node cannot renew its lease (fence.go);
	// guarded by mu.
	fenced bool
	// fenceGen counts Fence's calls, so that an Unfence that a Fence
	// overtook does not unfence; guarded by mu.
	fenceGen uint64
	// epoch is the node's registration that records made live here name
	// (SetNodeEpoch).
	epoch atomic.Int64

	stop chan struct{}
	wg   sync.WaitGroup
}

// New makes a manager. Call Recover before serving and Close at the end.
func New(cfg Config) (*Manager, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Manager{
		cfg:     cfg,
		log:     &sandboxLogger{cfg.Logger},
		adapter: newBackendCalls(cfg),
		entries: map[string]*entry{},
		live:    map[string]*entry{},
		byAddr:  map[netip.Addr]*entry{},
		waiting: map[string]bool{},
		pools:   newPools(cfg.Pools),
		stop:    make(chan struct{}),
	}, nil
}

// backend is the manager's backend with every optional capability as a
// method: the manager never asks a backend what it implements, and takes
// its own path for a missing capability only where Supports says so.
func (m *Manager) backend() *backendCalls {
	if m.adapter == nil { // a Manager made without New, in a test
		return newBackendCalls(m.cfg)
	}
	return m.adapter
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "sbx" + hex.EncodeToString(b[:])
}

func (m *Manager) now() time.Time { return m.cfg.Now().UTC().Truncate(time.Millisecond) }

// get loads a record of the account; another account's sandbox is not
// found, so ids leak nothing.
func (m *Manager) get(ctx context.Context, account, id string) (*sandbox.Record, error) {
	rec, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if account != "" && rec.Account != account {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	return rec, nil
}

// release forgets a sandbox's resources. The caller holds e.mu.
func (m *Manager) release(e *entry) {
	m.mu.Lock()
	if m.live[e.id] == e {
		delete(m.live, e.id)
	}
	m.unindexAddrLocked(e)
	t := e.transport
	e.inst, e.transport, e.frozen, e.frozenAt = nil, nil, false, time.Time{}
	m.mu.Unlock()
	if t != nil {
		t.CloseIdleConnections()
	}
}

// attach records a live instance in the entry and watches it. The caller
// holds e.mu.
func (m *Manager) attach(e *entry, inst sandbox.Instance) {
	t := newAgentTransport(inst)
	m.mu.Lock()
	e.inst, e.transport = inst, t
	m.mu.Unlock()
	// A sandbox that comes up while the node is fenced is frozen once,
	// here or by Fence (freezeOne decides under e.fz).
	m.freezeOne(context.Background(), e) // logged
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		select {
		case <-inst.Done():
			reason, msg := inst.Cause()
			m.ended(e.id, inst, reason, msg)
		case <-m.stop:
		}
	}()
}

// ended handles a sandbox that stopped by itself. It takes the lock like
// any operation, so it waits for one under way, and does nothing when the
// instance that stopped is no longer the sandbox's (it was paused or
// stopped on purpose meanwhile).
func (m *Manager) ended(id string, inst sandbox.Instance, reason sandbox.EndReason, msg string) {
	e := m.lock(id)
	defer e.mu.Unlock()
	if e.inst != inst {
		return
	}
	ctx, span := m.startOp(context.Background(), "end", "", id)
	defer span.End()
	m.finish(ctx, e, reason, msg)
}

// finish settles the sandbox's usage, destroys it on the backend and
// records its end. The caller holds e.mu. The backend's sandbox is
// destroyed even when the store fails, so nothing keeps running unbilled;
// a record the store could not update still says running or paused with
// nothing behind it, which the reaper ends at its deadline and a second
// stop ends at once.
//
// An end with reason node_lost is not settled: the node was declared lost,
// and what it ran is billed to its last report. A record another node
// holds is not written (only what runs here goes), unless it is a paused
// sandbox with a shared checkpoint, which any node may end: that one's
// settled usage and end are one write, and its checkpoint is removed only
// after it (finishShared). A write the store refuses as stale leaves the
// record as the other writer made it.
func (m *Manager) finish(ctx context.Context, e *entry, reason sandbox.EndReason, msg string) (*sandbox.Record, error) {
	ctx = context.WithoutCancel(ctx)
	rec, getErr := m.cfg.Store.GetSandbox(ctx, e.id)
	if getErr == nil && !m.ownsRecord(rec) && !sharedCheckpoint(rec) {
		m.destroyLocal(ctx, e, rec)
		return nil, elsewhere(rec, "end")
	}
	if getErr == nil && sharedCheckpoint(rec) {
		return m.finishShared(ctx, e, rec, reason, msg)
	}
	now := m.now()
	if getErr == nil && rec.State != sandbox.StateEnded && reason != sandbox.EndNodeLost {
		// Before the teardown: the CPU counter goes with the sandbox.
		if err := m.settle(ctx, e, rec, now); stale(err) {
			m.destroyLocal(ctx, e, rec)
			return m.afterStale(ctx, e.id)
		}
	}
	if err := m.backend().Destroy(ctx, e.id); err != nil {
		m.log.warn(e.id, "destroying sandbox", err)
	}
	m.release(e)
	if m.cfg.EgressState != nil {
		m.cfg.EgressState.Release(e.id)
	}
	m.stats.drop(e.id)
	if getErr != nil {
		// No record: a pool member died, and its room is free for the
		// filler to replace it.
		m.pools.unblockAll()
		m.pools.kick()
		return nil, fmt.Errorf("reading %s to record its end: %w", e.id, getErr)
	}
	if rec.State == sandbox.StateEnded {
		return rec, nil
	}
	if err := rec.End(reason, msg, now); err != nil {
		m.log.warn(e.id, "recording the end", err)
		return nil, err
	}
	if err := m.cfg.Store.PutSandbox(ctx, rec); err != nil {
		if stale(err) {
			return m.afterStale(ctx, e.id)
		}
		return nil, fmt.Errorf("recording end of %s: %w", e.id, err)
	}
	m.log.info(e.id, "sandbox ended", "reason", string(reason), "cost_nanos", rec.Usage.CostNanos)
	return rec, nil
}

// finishShared is finish of a paused sandbox whose checkpoint is in the
// shared storage. Another node may resume it until the end is recorded,
// and it is that node's sandbox then: so the settled usage and the end are
// one conditional write, and the checkpoint is removed only once that
// write has won. A write that fails leaves the checkpoint, and the record
// as it was. The caller holds e.mu.
func (m *Manager) finishShared(ctx context.Context, e *entry, rec *sandbox.Record, reason sandbox.EndReason, msg string) (*sandbox.Record, error) {
	now := m.now()
	ended := *rec
	var delta store.UsageDelta
	if reason != sandbox.EndNodeLost {
		delta, _ = m.pausedDelta(&ended, now)
	}
	err := ended.End(reason, msg, now)
	if err == nil {
		err = m.cfg.Store.RecordUsage(ctx, &ended, delta)
	}
	if err != nil {
		if stale(err) {
			m.destroyLocal(ctx, e, rec)
			return m.afterStale(ctx, e.id)
		}
		m.log.warn(e.id, "recording the end", err)
		return nil, fmt.Errorf("recording end of %s: %w", e.id, err)
	}
	if err := m.backend().Destroy(ctx, e.id); err != nil {
		m.log.warn(e.id, "destroying the checkpoint", err)
	}
	m.release(e)
	if m.cfg.EgressState != nil {
		m.cfg.EgressState.Release(e.id)
	}
	m.stats.drop(e.id)
	m.log.info(e.id, "sandbox ended", "reason", string(reason), "cost_nanos", ended.Usage.CostNanos)
	return &ended, nil
}

// afterStale is what finish returns when another process wrote the record
// first: the record as it is now when it has ended, else a conflict.
func (m *Manager) afterStale(ctx context.Context, id string) (*sandbox.Record, error) {
	m.log.warn(id, "the record changed meanwhile: it is left as the other writer made it", store.ErrStale)
	if rec, err := m.cfg.Store.GetSandbox(ctx, id); err == nil && rec.State == sandbox.StateEnded {
		return rec, nil
	}
	return nil, sandbox.Errorf(sandbox.KindConflict, "sandbox %s changed meanwhile (another process ended or moved it); it does not run on this node any more", id)
}

// Close stops the reaper, the watchers and the pools' filler, destroys
// the idle pool members, and closes the backend if it can be. Sandboxes
// keep running: the next server reattaches them.
func (m *Manager) Close() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	m.wg.Wait()
	m.closePools()
	if err := m.backend().Close(); err != nil {
		m.cfg.Logger.Warn("closing the backend", "err", err)
	}
}

// list lists the sandboxes of an account (every account's when it is
// empty) in the given states.
func (m *Manager) list(ctx context.Context, account string, states ...sandbox.State) ([]*sandbox.Record, error) {
	return m.cfg.Store.ListSandboxes(ctx, store.SandboxFilter{Account: account, States: states})
}

// DefaultConcurrency is how many sandboxes an account runs at once unless
// it says otherwise.
func (m *Manager) DefaultConcurrency() int { return m.cfg.DefaultConcurrency }
