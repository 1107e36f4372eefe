package manager

import (
	"context"
	"errors"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// Many nodes may share one store. Every record names the node that holds
// it (Record.Node, "" on a single box), a manager acts on its own node's
// records only, and every record write carries the version it read: a
// write the store refuses with store.ErrStale means another process wrote
// the record since (the failure detector ended it, another node resumed
// its shared checkpoint), and what runs here is nobody's any more.

// mine lists this node's records in the given states.
func (m *Manager) mine(ctx context.Context, states ...sandbox.State) ([]*sandbox.Record, error) {
	recs, err := m.cfg.Store.ListSandboxes(ctx, store.SandboxFilter{Node: m.cfg.Node, States: states})
	if err != nil {
		return nil, err
	}
	out := recs[:0]
	for _, r := range recs {
		if m.ownsRecord(r) { // the filter's "" is every node's
			out = append(out, r)
		}
	}
	return out, nil
}

// SetNodeEpoch sets the node's registration (store.Node.Epoch) that the
// records this node makes live from now on name (Record.NodeEpoch): the
// node daemon calls it after every registration. A failure detector that
// gave up on an epoch ends only records of that epoch or earlier.
func (m *Manager) SetNodeEpoch(epoch int64) { m.epoch.Store(epoch) }

// ownsRecord reports whether the record is this node's.
func (m *Manager) ownsRecord(rec *sandbox.Record) bool { return rec.Node == m.cfg.Node }

// elsewhere refuses an operation on a record another node holds.
func elsewhere(rec *sandbox.Record, op string) error {
	return sandbox.Errorf(sandbox.KindConflict, "cannot %s sandbox %s on this node: node %s holds it", op, rec.ID, rec.Node)
}

// sharedCheckpoint reports whether a paused record's checkpoint is in the
// storage every node shares.
func sharedCheckpoint(rec *sandbox.Record) bool {
	return rec.State == sandbox.StatePaused && rec.Checkpoint != nil && rec.Checkpoint.Shared
}

// stale reports whether a write failed because the record changed since
// it was read.
func stale(err error) bool { return errors.Is(err, store.ErrStale) }

// dropStale handles a write of rec (the record as this node last read it)
// refused as stale: the sandbox here is destroyed and the record is not
// written. The caller holds e.mu.
func (m *Manager) dropStale(ctx context.Context, e *entry, rec *sandbox.Record) error {
	m.log.warn(e.id, "the record changed meanwhile: the sandbox is not this node's any more", store.ErrStale)
	m.destroyLocal(ctx, e, rec)
	return sandbox.Errorf(sandbox.KindConflict, "sandbox %s changed meanwhile (another process ended or moved it); it does not run on this node any more", e.id)
}

// destroyLocal destroys what this node holds of a sandbox that is not its
// own any more: a live one, or what an own record left on this node's disk (a
// local checkpoint). Nothing else: a record of another node, or a shared
// checkpoint, may be another node's sandbox by now, and the backend's
// Destroy would remove that one's checkpoint (and, on a host that runs
// several nodes, its cgroup). The caller holds e.mu.
func (m *Manager) destroyLocal(ctx context.Context, e *entry, rec *sandbox.Record) {
	if e.inst != nil || m.isLive(e) || (m.ownsRecord(rec) && !sharedCheckpoint(rec)) {
		m.teardown(ctx, e)
	}
}

// teardown destroys a sandbox on the backend and forgets it here, without
// a record write. The caller holds e.mu.
func (m *Manager) teardown(ctx context.Context, e *entry) {
	if err := m.backend().Destroy(context.WithoutCancel(ctx), e.id); err != nil {
		m.log.warn(e.id, "destroying sandbox", err)
	}
	m.release(e)
	m.closeFlows(e.id)
	if m.cfg.EgressState != nil {
		m.cfg.EgressState.Release(e.id)
	}
	m.stats.drop(e.id)
	m.pools.unblockAll()
	m.pools.kick()
}

// isLive reports whether the entry holds room here.
func (m *Manager) isLive(e *entry) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[e.id] == e
}
