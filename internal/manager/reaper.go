package manager

import (
	"context"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Recover reattaches the sandboxes an earlier server of this node left
// running, ends those it cannot reach with reason host_restart, removes
// every leftover of sandboxes that are not kept (an earlier server's pool
// members among them: they have no record; and what other nodes hold),
// and starts the reaper and the pools' filler.
func (m *Manager) Recover(ctx context.Context) error {
	recs, err := m.mine(ctx, sandbox.StateStarting, sandbox.StateRunning)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		e := m.lock(rec.ID)
		var inst sandbox.Instance
		if rec.State == sandbox.StateRunning {
			inst, err = m.cfg.Backend.Attach(ctx, rec.ID, rec.Spec)
		}
		if inst != nil && err == nil && m.admitRecovered(e, rec) {
			m.attach(e, inst)
			m.indexAddr(e, rec.Spec.Network)
			m.log.info(rec.ID, "sandbox reattached")
		} else {
			m.finish(ctx, e, sandbox.EndHostRestart, "the server restarted and could not reattach the sandbox")
		}
		e.mu.Unlock()
	}
	keep := map[string]bool{}
	kept, err := m.mine(ctx, sandbox.StateRunning, sandbox.StatePaused)
	if err != nil {
		return err
	}
	for _, rec := range kept {
		keep[rec.ID] = true
	}
	if err := m.cfg.Backend.Sweep(ctx, func(id string) bool { return keep[id] }); err != nil {
		m.cfg.Logger.Warn("sweeping leftovers", "err", err)
	}
	m.every(m.cfg.ReapInterval, m.Reap)
	m.every(m.cfg.MeterInterval, m.Meter)
	m.startFilling()
	return nil
}

// every runs f each interval until the manager closes.
func (m *Manager) every(interval time.Duration, f func(context.Context)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				f(context.Background())
			}
		}
	}()
}

// Reap ends or pauses every sandbox of this node whose lease is over and
// removes every paused one whose retention is over. A fenced node reaps
// nothing: its records may not be its own any more.
func (m *Manager) Reap(ctx context.Context) {
	if m.Fenced() {
		return
	}
	recs, err := m.mine(ctx, sandbox.StateRunning, sandbox.StatePaused)
	if err != nil {
		m.cfg.Logger.Warn("listing sandboxes to reap", "err", err)
		return
	}
	now := m.now()
	for _, r := range recs {
		due := (r.State == sandbox.StateRunning && !now.Before(r.LeaseEndsAt)) ||
			(r.State == sandbox.StatePaused && r.RetentionEndsAt != nil && !now.Before(*r.RetentionEndsAt))
		if due {
			m.reapOne(ctx, r.ID)
		}
	}
}

func (m *Manager) reapOne(ctx context.Context, id string) {
	m.whenFree(id, func(e *entry) { m.reapLocked(ctx, e) })
}

func (m *Manager) reapLocked(ctx context.Context, e *entry) {
	id := e.id
	rec, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil || !m.ours(rec) {
		return
	}
	now := m.now()
	switch {
	case rec.State == sandbox.StateRunning && !now.Before(rec.LeaseEndsAt):
		if rec.Spec.OnLeaseEnd == sandbox.OnLeaseEndPause && e.inst != nil {
			m.pause(ctx, e, rec)
			return
		}
		m.finish(ctx, e, sandbox.EndLeaseEnded, "")
	case rec.State == sandbox.StatePaused && rec.RetentionEndsAt != nil && !now.Before(*rec.RetentionEndsAt):
		m.finish(ctx, e, sandbox.EndRetentionEnded, "")
	}
}
