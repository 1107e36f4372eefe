package manager

import (
	"context"
	"errors"
	"sync"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// MaxForks bounds one fork's count.
const MaxForks = 16

// Fork snapshots running sandbox id and starts count sandboxes from the
// snapshot, each with the source's lease length, network policy, metadata
// and cost cap, and an identity of its own; the source keeps running. It
// is all or nothing: a count past what the account may run at once is
// refused before anything is made, and when one start fails the others
// are stopped. The snapshot is removed once the sandboxes run, unless
// keep.
func (m *Manager) Fork(ctx context.Context, account, keyID, id string, count int, keep bool) (*sandbox.Snapshot, []*sandbox.Record, error) {
	if count < 1 || count > MaxForks {
		return nil, nil, invalid("count must be 1 to %d, got %d", MaxForks, count)
	}
	if err := m.snapshotsOffered(); err != nil {
		return nil, nil, err
	}
	src, err := m.get(ctx, account, id)
	if err != nil {
		return nil, nil, err
	}
	if err := m.roomFor(ctx, account, count); err != nil {
		return nil, nil, err
	}
	snap, err := m.Snapshot(ctx, account, id, "fork of "+id)
	if err != nil {
		return nil, nil, err
	}
	req := service.CreateRequest{
		Snapshot:       snap.ID,
		TimeoutSeconds: int(src.Spec.Timeout.Seconds()),
		OnLeaseEnd:     src.Spec.OnLeaseEnd,
		AutoResume:     src.Spec.AutoResume,
		Metadata:       src.Spec.Metadata,
		Network:        src.Spec.Network,
		MaxCostMicros:  src.Spec.MaxCostMicros,
		// Read-only (snapshotVolumes), on this node, held mounted by the
		// running source meanwhile.
		Volumes: snap.Spec.Volumes,
	}
	recs := make([]*sandbox.Record, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i := range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs[i], errs[i] = m.Create(ctx, account, keyID, req)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, r := range recs {
			if r != nil {
				if _, serr := m.Stop(context.WithoutCancel(ctx), account, r.ID); serr != nil {
					m.log.warn(r.ID, "stopping a fork of a fork that failed", serr)
				}
			}
		}
		m.removeSnapshot(ctx, snap)
		// The first error says it: the others are most often the same.
		for _, e := range errs {
			if e != nil {
				return nil, nil, e
			}
		}
	}
	if !keep {
		if err := m.removeSnapshot(ctx, snap); err != nil {
			m.cfg.Logger.Warn("removing a fork's snapshot", "snapshot_id", snap.ID, "err", err)
		}
		snap = nil
	}
	return snap, recs, nil
}

// roomFor refuses (concurrency_limit_reached) count more live sandboxes
// of the account than its concurrency lets run at once. Each create is
// admitted by the store again: this check makes a fork that cannot fit
// fail before it makes anything.
func (m *Manager) roomFor(ctx context.Context, account string, count int) error {
	acct, err := m.account(ctx, account)
	if err != nil {
		return err
	}
	limit := acct.Concurrency
	if limit == 0 {
		limit = m.cfg.DefaultConcurrency
	}
	live, err := m.cfg.Store.ListSandboxes(ctx, store.SandboxFilter{Account: account, States: []sandbox.State{sandbox.StateStarting, sandbox.StateRunning}})
	if err != nil {
		return err
	}
	if len(live)+count > limit {
		return sandbox.Errorf(sandbox.KindConcurrency, "the account runs %d sandboxes and may run %d at once: %d forks do not fit", len(live), limit, count)
	}
	return nil
}
