package manager

import (
	"context"
	"errors"
	"fmt"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// A node of many (Config.Node) holds a lease in the store. A node that
// cannot renew it is fenced before the failure detector may give up on it:
// its sandboxes are frozen (sandbox.Freezer) and it refuses new work, so
// that nothing it runs acts or is billed while another process may be
// ending its records. When the store answers again it unfences: what its
// records still say is its own is thawed, the rest destroyed here without
// a record write (the detector, or whoever wrote it, owns it now).

// errFenced is what a fenced node answers to work that needs the store. Of
// kind capacity_exhausted, so that an API server places a create
// elsewhere.
func errFenced() error {
	return sandbox.Errorf(sandbox.KindCapacityExhausted, "this node cannot reach the store")
}

// serving refuses work while the node is fenced.
func (m *Manager) serving() error {
	if m.Fenced() {
		return errFenced()
	}
	return nil
}

// Fenced reports whether the node is fenced.
func (m *Manager) Fenced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fenced
}

// Fence freezes every live sandbox and refuses Agent, Create, Resume,
// Pause, Extend, SetLease and SetNetwork until Unfence; the reaper, the
// meter and the pools' filler pause too. It touches no store and takes no
// sandbox's lock: an operation stuck on the store must not hold it up. A
// sandbox that comes up meanwhile is frozen as it attaches. The error joins
// the sandboxes that could not be frozen; the node is fenced all the same.
func (m *Manager) Fence(ctx context.Context) error {
	m.mu.Lock()
	if m.fenced {
		m.mu.Unlock()
		return nil
	}
	m.fenced = true
	var ids []string
	for id, e := range m.live {
		if e.inst != nil && !e.frozen {
			e.frozen = true
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	m.cfg.Logger.Warn("fenced: the node's lease could not be renewed; its sandboxes are frozen", "sandboxes", len(ids))
	var errs []error
	for _, id := range ids {
		if err := m.freeze(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("freezing %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// Unfence checks every local sandbox against its record: one still live
// and this node's is thawed, any other is destroyed here without a record
// write. Then the node serves again. It fails, staying fenced, when a
// record cannot be read (the ones checked so far stay as checked).
func (m *Manager) Unfence(ctx context.Context) error {
	if err := m.reconcile(ctx, true); err != nil {
		return err
	}
	m.mu.Lock()
	m.fenced = false
	m.mu.Unlock()
	m.cfg.Logger.Info("unfenced: the node serves again")
	m.pools.kick()
	return nil
}

// DropUnowned destroys every local sandbox whose record says it ended or
// is another node's, without a record write; the node runs it after every
// renewal of its lease. Sandboxes busy with an operation are left to the
// next call.
func (m *Manager) DropUnowned(ctx context.Context) error {
	return m.reconcile(ctx, false)
}

// reconcile is Unfence's check (all, thawing) or DropUnowned's (the idle
// sandboxes only, no thawing).
func (m *Manager) reconcile(ctx context.Context, unfence bool) error {
	idle := m.pools.idleIDs()
	for _, id := range m.liveIDs() {
		var e *entry
		if unfence {
			e = m.lock(id)
		} else if e = m.tryLock(id); e == nil {
			continue
		}
		err := m.reconcileOne(ctx, e, idle[id], unfence)
		e.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// reconcileOne checks one sandbox; the caller holds e.mu.
func (m *Manager) reconcileOne(ctx context.Context, e *entry, idle, unfence bool) error {
	if !m.isLive(e) || e.inst == nil {
		return nil // it went, or it is still coming up
	}
	if idle {
		// A pool member: nobody's, no record.
		if unfence {
			m.thaw(ctx, e)
		}
		return nil
	}
	rec, err := m.cfg.Store.GetSandbox(ctx, e.id)
	switch {
	case sandbox.KindOf(err) == sandbox.KindNotFound:
		// A member a claim is taking: the claim writes its record.
		if unfence {
			m.thaw(ctx, e)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading %s: %w", e.id, err)
	case rec.Live() && m.ours(rec):
		if unfence {
			m.thaw(ctx, e)
		}
		return nil
	}
	m.log.info(e.id, "destroyed here: its record says it is not this node's", "state", string(rec.State), "node", rec.Node)
	m.teardown(ctx, e)
	return nil
}

// EndAll destroys every local sandbox and ends its record with reason,
// when the record is still live and this node's (conditionally, as any
// write; node_lost settles nothing), and ends as well this node's live
// records that nothing runs here for. Then it removes whatever this node
// keeps of sandboxes that are not its running or paused ones (checkpoints
// of paused sandboxes that the detector ended). The node calls it when it
// learns it was declared lost. Idle pool members stay: they are nobody's.
func (m *Manager) EndAll(ctx context.Context, reason sandbox.EndReason) error {
	msg := "the node lost its lease in the store"
	idle := m.pools.idleIDs()
	done := map[string]bool{}
	for _, id := range m.liveIDs() {
		if idle[id] {
			continue
		}
		done[id] = true
		m.endOne(ctx, id, reason, msg)
	}
	recs, err := m.mine(ctx, sandbox.StateStarting, sandbox.StateRunning)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if !done[r.ID] {
			m.endOne(ctx, r.ID, reason, msg)
		}
	}
	kept, err := m.mine(ctx, sandbox.StateRunning, sandbox.StatePaused)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, r := range kept {
		keep[r.ID] = true
	}
	m.mu.Lock()
	for id := range m.entries { // pool members, and operations under way
		keep[id] = true
	}
	m.mu.Unlock()
	return m.cfg.Backend.Sweep(ctx, func(id string) bool { return keep[id] })
}

// endOne is one sandbox of EndAll.
func (m *Manager) endOne(ctx context.Context, id string, reason sandbox.EndReason, msg string) {
	e := m.lock(id)
	defer e.mu.Unlock()
	rec, err := m.cfg.Store.GetSandbox(ctx, id)
	if err == nil && rec.Live() && m.ours(rec) {
		if _, err := m.finish(ctx, e, reason, msg); err != nil {
			m.log.warn(id, "ending sandbox", err)
		}
		return
	}
	if m.isLive(e) {
		m.teardown(ctx, e)
	}
}

// Load is what admission holds now: the live sandboxes and their sizes.
// Idle pool members are left out, since a create evicts them.
func (m *Manager) Load() store.NodeLoad {
	idle := m.pools.idleIDs()
	m.mu.Lock()
	defer m.mu.Unlock()
	var l store.NodeLoad
	for id, e := range m.live {
		if idle[id] {
			continue
		}
		l.Sandboxes++
		l.VCPUs += e.vcpus
		l.MemoryMiB += e.memoryMiB
		l.DiskMiB += e.diskMiB
	}
	return l
}

// liveIDs lists the admitted sandboxes.
func (m *Manager) liveIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.live))
	for id := range m.live {
		ids = append(ids, id)
	}
	return ids
}

// freeze stops a sandbox's processes where they are, if the backend can.
func (m *Manager) freeze(ctx context.Context, id string) error {
	f, ok := m.cfg.Backend.(sandbox.Freezer)
	if !ok {
		return nil
	}
	err := f.Freeze(context.WithoutCancel(ctx), id)
	if err != nil {
		m.log.warn(id, "freezing sandbox", err)
	}
	return err
}

// thaw lets a frozen sandbox go on; the caller holds e.mu.
func (m *Manager) thaw(ctx context.Context, e *entry) {
	m.mu.Lock()
	was := e.frozen
	e.frozen = false
	m.mu.Unlock()
	if !was {
		return
	}
	if f, ok := m.cfg.Backend.(sandbox.Freezer); ok {
		if err := f.Thaw(context.WithoutCancel(ctx), e.id); err != nil {
			m.log.warn(e.id, "thawing sandbox", err)
		}
	}
}
