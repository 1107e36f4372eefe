package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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

// freezeParallel bounds how many sandboxes Fence freezes at once: a
// `runsc pause` takes a while, and a fence must be quick on a full node.
const freezeParallel = 16

// Fence freezes every live sandbox and refuses Agent, Create, Resume,
// Pause, Extend, SetLease and SetNetwork until Unfence; the reaper, the
// meter and the pools' filler pause too. It touches no store and takes no
// sandbox's lock: an operation stuck on the store must not hold it up. A
// sandbox that comes up meanwhile is frozen as it attaches. The error joins
// the sandboxes that could not be frozen; the node is fenced all the same.
//
// It may be called again at any time, also while or after an Unfence that
// was cut short: each call freezes whatever live sandbox is not frozen now
// (those a partial Unfence thawed) and leaves the frozen ones be, and an
// Unfence under way when it is called does not unfence the node.
func (m *Manager) Fence(ctx context.Context) error {
	m.mu.Lock()
	was := m.fenced
	m.fenced = true
	m.fenceGen++
	m.mu.Unlock()
	n, err := m.freezeLive(ctx)
	if !was {
		m.cfg.Logger.Warn("fenced: the node's lease could not be renewed; its sandboxes are frozen", "sandboxes", n)
	}
	return err
}

// freezeLive freezes every live sandbox that is not frozen, up to
// freezeParallel at once, and says how many it froze.
func (m *Manager) freezeLive(ctx context.Context) (int, error) {
	m.mu.Lock()
	var es []*entry
	for _, e := range m.live {
		if e.inst != nil && !e.frozen {
			es = append(es, e)
		}
	}
	m.mu.Unlock()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		n    int
		errs []error
		sem  = make(chan struct{}, freezeParallel)
	)
	for _, e := range es {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			froze, err := m.freezeOne(ctx, e)
			mu.Lock()
			defer mu.Unlock()
			if froze {
				n++
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("freezing %s: %w", e.id, err))
			}
		}()
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// Unfence checks every local sandbox against its record: one still live
// and this node's is thawed (the time it was frozen is not billed), any
// other is destroyed here without a record write. Then the node serves
// again. It fails, staying fenced, when a record cannot be read or
// written: what it thawed so far is frozen again, so a node that stays
// fenced runs nothing, and the next Unfence checks again. It fails too,
// fenced, when a Fence came while it ran.
func (m *Manager) Unfence(ctx context.Context) error {
	m.mu.Lock()
	gen := m.fenceGen
	m.mu.Unlock()
	err := m.reconcile(ctx, true, gen)
	m.mu.Lock()
	again := m.fenceGen != gen
	if err == nil && !again {
		m.fenced = false
	}
	m.mu.Unlock()
	if err == nil && again {
		err = errors.New("the node was fenced again while it unfenced")
	}
	if err != nil {
		if _, ferr := m.freezeLive(ctx); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return err
	}
	m.cfg.Logger.Info("unfenced: the node serves again")
	m.pools.kick()
	return nil
}

// DropUnowned destroys every local sandbox whose record says it ended or
// is another node's, without a record write; the node runs it after every
// renewal of its lease. Sandboxes busy with an operation are left to the
// next call.
func (m *Manager) DropUnowned(ctx context.Context) error {
	return m.reconcile(ctx, false, 0)
}

// reconcile is Unfence's check (all, thawing) or DropUnowned's (the idle
// sandboxes only, no thawing). gen is Unfence's fence generation: a thaw
// after a later Fence leaves the sandbox frozen.
func (m *Manager) reconcile(ctx context.Context, unfence bool, gen uint64) error {
	idle := m.pools.idleIDs()
	for _, id := range m.liveIDs() {
		var e *entry
		if unfence {
			e = m.lock(id)
		} else if e = m.tryLock(id); e == nil {
			continue
		}
		err := m.reconcileOne(ctx, e, idle[id], unfence, gen)
		e.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// reconcileOne checks one sandbox; the caller holds e.mu.
func (m *Manager) reconcileOne(ctx context.Context, e *entry, idle, unfence bool, gen uint64) error {
	if !m.isLive(e) || e.inst == nil {
		return nil // it went, or it is still coming up
	}
	if idle {
		// A pool member: nobody's, no record.
		if unfence {
			m.thaw(ctx, e, gen)
		}
		return nil
	}
	rec, err := m.cfg.Store.GetSandbox(ctx, e.id)
	switch {
	case sandbox.KindOf(err) == sandbox.KindNotFound:
		// A member a claim is taking: the claim writes its record.
		if unfence {
			m.thaw(ctx, e, gen)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading %s: %w", e.id, err)
	case rec.Live() && m.ownsRecord(rec):
		if unfence {
			if err := m.skipFrozen(ctx, e, rec); err != nil {
				return err
			}
			m.thaw(ctx, e, gen)
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
	return m.backend().Sweep(ctx, func(id string) bool { return keep[id] })
}

// endOne is one sandbox of EndAll.
func (m *Manager) endOne(ctx context.Context, id string, reason sandbox.EndReason, msg string) {
	e := m.lock(id)
	defer e.mu.Unlock()
	rec, err := m.cfg.Store.GetSandbox(ctx, id)
	if err == nil && rec.Live() && m.ownsRecord(rec) {
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

// skipFrozen bills a frozen running sandbox up to its freeze and moves
// its sample to now at no cost, before it is thawed: its customer could
// not use it meanwhile (and its CPU did not advance). A stale write drops
// the sandbox here (it is not this node's); any other failure is
// returned. The caller holds e.mu.
func (m *Manager) skipFrozen(ctx context.Context, e *entry, rec *sandbox.Record) error {
	m.mu.Lock()
	frozen := e.frozen
	m.mu.Unlock()
	if !frozen || rec.State != sandbox.StateRunning {
		return nil
	}
	err := m.sample(ctx, e, rec, m.now())
	if stale(err) {
		m.dropStale(ctx, e, rec)
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording the usage of %s before its thaw: %w", e.id, err)
	}
	return nil
}

// freezeOne freezes a live sandbox unless it is frozen already or the node
// is not fenced any more, and says whether it tried. When the backend
// cannot freeze (no sandbox.Freezer), the sandbox is marked frozen all
// the same: it is not billed while fenced.
func (m *Manager) freezeOne(ctx context.Context, e *entry) (bool, error) {
	e.fz.Lock()
	defer e.fz.Unlock()
	m.mu.Lock()
	need := m.fenced && e.inst != nil && !e.frozen
	if need {
		e.frozen, e.frozenAt = true, m.now()
	}
	m.mu.Unlock()
	if !need {
		return false, nil
	}
	if !m.backend().Supports(sandbox.CapFreeze) {
		return true, nil
	}
	err := m.backend().Freeze(context.WithoutCancel(ctx), e.id)
	if err != nil {
		// Not frozen: the next Fence tries again, and it is billed.
		m.log.warn(e.id, "freezing sandbox", err)
		m.mu.Lock()
		e.frozen, e.frozenAt = false, time.Time{}
		m.mu.Unlock()
	}
	return true, err
}

// thaw lets a frozen sandbox go on, unless a Fence came after the Unfence
// of generation gen began; the caller holds e.mu.
func (m *Manager) thaw(ctx context.Context, e *entry, gen uint64) {
	e.fz.Lock()
	defer e.fz.Unlock()
	m.mu.Lock()
	was := e.frozen && m.fenceGen == gen
	if was {
		e.frozen, e.frozenAt = false, time.Time{}
	}
	m.mu.Unlock()
	if !was {
		return
	}
	if m.backend().Supports(sandbox.CapFreeze) {
		if err := m.backend().Thaw(context.WithoutCancel(ctx), e.id); err != nil {
			m.log.warn(e.id, "thawing sandbox", err)
		}
	}
}
