package manager

import (
	"context"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Recover reattaches the sandboxes an earlier server of this node left
// running, ends those it cannot reach with reason host_restart, takes up
// the resumes it left cut short (recoverResume: reattached, or paused
// again with their checkpoint), removes
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
		if resuming(rec) {
			m.recoverResume(ctx, e, rec)
			e.mu.Unlock()
			continue
		}
		var inst sandbox.Instance
		if rec.State == sandbox.StateRunning {
			inst, err = m.backend().Attach(ctx, rec.ID, withIsolation(rec))
		}
		if inst != nil && err == nil && m.admitRecovered(ctx, e, rec) {
			m.attach(e, inst)
			m.indexAddr(e, rec.Spec.Network)
			m.log.info(rec.ID, "sandbox reattached")
		} else {
			m.finish(ctx, e, sandbox.EndHostRestart, "the server restarted and could not reattach the sandbox")
		}
		e.mu.Unlock()
	}
	keep := map[string]bool{}
	kept, err := m.mine(ctx, sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused)
	if err != nil {
		return err
	}
	for _, rec := range kept {
		// A resume whose record could not be put back paused keeps its
		// checkpoint: the reaper tries again.
		keep[rec.ID] = rec.State != sandbox.StateStarting || resuming(rec)
	}
	m.sweepSnapshots(ctx)
	if err := m.backend().Sweep(ctx, func(id string) bool { return keep[id] }); err != nil {
		m.cfg.Logger.Warn("sweeping leftovers", "err", err)
	}
	m.every(m.cfg.ReapInterval, m.Reap)
	m.every(m.cfg.MeterInterval, m.Meter)
	m.every(m.cfg.StatsInterval, m.sampleStats)
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

// Reap ends or pauses every sandbox of this node whose lease is over,
// removes every paused one whose retention is over, and takes up the
// starting records of this node that no operation here is making live (a
// resume or create whose write committed though the store answered an
// error, a resume whose record could not be put back paused; see
// recoverStarting). A fenced node reaps nothing: its records may not be
// its own any more.
func (m *Manager) Reap(ctx context.Context) {
	if m.Fenced() {
		return
	}
	recs, err := m.mine(ctx, sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused)
	if err != nil {
		m.cfg.Logger.Warn("listing sandboxes to reap", "err", err)
		return
	}
	m.billSnapshots(ctx)
	m.expireSnapshots(ctx)
	now := m.now()
	for _, r := range recs {
		if r.State == sandbox.StateStarting {
			// One that is busy is a create or resume under way here (or
			// the next pass's).
			if e := m.tryLock(r.ID); e != nil {
				m.reapLocked(ctx, e)
				e.mu.Unlock()
			}
			continue
		}
		due := (r.State == sandbox.StateRunning && !now.Before(r.LeaseEndsAt)) ||
			(r.State == sandbox.StatePaused && r.RetentionEndsAt != nil && !now.Before(*r.RetentionEndsAt))
		if due {
			m.reapOne(ctx, r.ID)
		}
	}
}

func (m *Manager) reapOne(ctx context.Context, id string) {
	m.runLockedOrLater(id, func(e *entry) { m.reapLocked(ctx, e) })
}

func (m *Manager) reapLocked(ctx context.Context, e *entry) {
	id := e.id
	ctx, span := m.startOp(ctx, "reap", "", id)
	defer span.End()
	rec, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil || !m.ownsRecord(rec) {
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
	case rec.State == sandbox.StateStarting && !m.isLive(e) && e.inst == nil:
		// With the lock held no create or resume of it is under way
		// here: nothing will write this record but this.
		m.recoverStarting(ctx, e, rec)
	}
}

// resuming reports whether a starting record is a resume under way (or
// cut short): only a resume's starting record has a pause time, which the
// running record clears (a create's has none).
func resuming(rec *sandbox.Record) bool {
	return rec.State == sandbox.StateStarting && rec.PausedAt != nil
}

// recoverStarting takes up a starting record of this node that nothing
// here is making live: an interrupted resume is reattached or put back
// paused (recoverResume); an interrupted create is ended with reason error,
// since the sandbox never ran (or, when it did, did not get its record).
// The caller holds e.mu.
func (m *Manager) recoverStarting(ctx context.Context, e *entry, rec *sandbox.Record) {
	if resuming(rec) {
		m.recoverResume(ctx, e, rec)
		return
	}
	m.finish(ctx, e, sandbox.EndError, "the sandbox's start was not recorded")
}

// recoverResume settles a resume cut short (the server was killed while the
// backend restored the checkpoint, or the store answered an error to a
// write it made): when the backend has the sandbox running it is
// reattached and recorded running, else its record goes back to paused
// (conditionally: another node may have taken it meanwhile), its
// checkpoint kept. A record that cannot be put back stays starting, and
// the reaper tries again. The caller holds e.mu.
func (m *Manager) recoverResume(ctx context.Context, e *entry, rec *sandbox.Record) {
	// What the record goes back to when the resume does not go through.
	paused := *rec
	if err := paused.Move(sandbox.StatePaused); err != nil {
		m.log.warn(rec.ID, "taking up an interrupted resume", err)
		return
	}
	if inst, err := m.backend().Attach(ctx, rec.ID, withIsolation(rec)); err == nil && inst != nil {
		m.admitRecovered(ctx, e, rec)
		m.attach(e, inst)
		m.indexAddr(e, rec.Spec.Network)
		// The resume settled the paused time up to its switch.
		if _, err := m.recordResumed(ctx, e, rec, &paused, rec.Usage.SampledAt); err == nil {
			m.log.info(rec.ID, "an interrupted resume's sandbox reattached")
		}
		return
	}
	err := m.putBackPaused(ctx, rec.ID, &paused, rec.Version)
	if stale(err) {
		// Ended or taken by another process since: what this node holds of
		// it goes, a shared checkpoint stays (see destroyLocal).
		m.destroyLocal(ctx, e, &paused)
		return
	}
	if err == nil {
		m.log.info(rec.ID, "an interrupted resume: the sandbox stays paused")
	}
}
