package manager

import (
	"context"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// day is the UTC day usage at t counts toward.
func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// sample advances a running sandbox's usage to now: memory at its size
// for the time since the last sample, and the CPU its cgroup consumed
// since. The record and the ledger change in one transaction; when that
// fails, rec's usage is left as it was, so that a later write of rec does
// not claim what the ledger never counted. The caller holds e.mu.
func (m *Manager) sample(ctx context.Context, e *entry, rec *sandbox.Record, now time.Time) error {
	old := rec.Usage
	d, ok := m.runningDelta(e, rec, now)
	if !ok {
		return nil
	}
	if err := m.cfg.Store.RecordUsage(ctx, rec, d); err != nil {
		rec.Usage = old
		return err
	}
	return nil
}

// runningDelta advances rec's usage to now as sample does and returns what
// the ledger must add; ok is false when there is nothing to bill from
// (never started). The time a fence kept the sandbox frozen is not billed:
// its customer could not use it. Usage is billed up to the freeze, and the
// sample then starts again at now. The caller holds e.mu.
func (m *Manager) runningDelta(e *entry, rec *sandbox.Record, now time.Time) (store.UsageDelta, bool) {
	u := &rec.Usage
	if u.SampledAt.IsZero() {
		if rec.StartedAt == nil {
			return store.UsageDelta{}, false
		}
		u.SampledAt = *rec.StartedAt
	}
	to := now
	m.mu.Lock()
	if e.frozen && !e.frozenAt.IsZero() && e.frozenAt.Before(to) {
		to = e.frozenAt
	}
	m.mu.Unlock()
	dt := to.Sub(u.SampledAt).Milliseconds()
	if dt < 0 {
		dt = 0
	}
	var dCPU int64
	if m.backend().Supports(sandbox.CapMeter) && e.inst != nil {
		cpu, err := m.backend().CPUTime(e.id)
		if err != nil && !e.cpuWarned {
			// Billed for memory only until the counter reads again.
			e.cpuWarned = true
			m.log.warn(e.id, "reading the CPU counter", err)
		}
		if err == nil {
			counter := cpu.Nanoseconds()
			dCPU = counter - u.CPUCounterNs
			if dCPU < 0 { // the counter restarted
				dCPU = counter
			}
			u.CPUCounterNs = counter
		}
	}
	dMem := int64(rec.Spec.MemoryMiB) * dt
	cost := m.cfg.Prices.Running(dMem, dCPU)
	u.AliveMs += dt
	u.MemoryMiBMs += dMem
	u.CPUNs += dCPU
	u.CostNanos += cost
	u.SampledAt = u.SampledAt.Add(time.Duration(dt) * time.Millisecond)
	if to != now && u.SampledAt.Before(now) {
		// Frozen since to: the rest up to now costs nothing.
		u.SampledAt = now
	}
	return store.UsageDelta{
		Day: day(now), Account: rec.Account, KeyID: rec.KeyID,
		AliveMs: dt, MemoryMiBMs: dMem, CPUNs: dCPU, CostNanos: cost,
	}, true
}

// samplePaused advances a paused sandbox's usage: the storage price for
// the time it was kept. As sample, it leaves rec's usage as it was when
// the write fails. The caller holds e.mu.
func (m *Manager) samplePaused(ctx context.Context, rec *sandbox.Record, now time.Time) error {
	old := rec.Usage
	d, ok := m.pausedDelta(rec, now)
	if !ok {
		return nil
	}
	if err := m.cfg.Store.RecordUsage(ctx, rec, d); err != nil {
		rec.Usage = old
		return err
	}
	return nil
}

// pausedDelta advances a paused record's usage to now and returns what the
// ledger must add; ok is false when there is nothing to bill.
func (m *Manager) pausedDelta(rec *sandbox.Record, now time.Time) (store.UsageDelta, bool) {
	u := &rec.Usage
	if u.SampledAt.IsZero() {
		return store.UsageDelta{}, false
	}
	dt := now.Sub(u.SampledAt).Milliseconds()
	if dt <= 0 {
		return store.UsageDelta{}, false
	}
	cost := m.cfg.Prices.Paused(rec.Spec.MemoryMiB, dt)
	u.PausedMs += dt
	u.CostNanos += cost
	u.SampledAt = u.SampledAt.Add(time.Duration(dt) * time.Millisecond)
	return store.UsageDelta{
		Day: day(now), Account: rec.Account, KeyID: rec.KeyID, CostNanos: cost,
	}, true
}

// settle brings a sandbox's usage up to now, whatever its state. The
// caller holds e.mu; now is also when the change that follows (an end, a
// pause) is recorded, so that the bill and the record agree. It logs what
// fails and returns it: store.ErrStale says the record is not this node's
// to write any more (see dropStale).
func (m *Manager) settle(ctx context.Context, e *entry, rec *sandbox.Record, now time.Time) error {
	var err error
	switch rec.State {
	case sandbox.StateRunning:
		if e.inst == nil {
			// Not attached (it died while no server watched): when it
			// stopped is unknown, so it is billed to its last sample only.
			return nil
		}
		err = m.sample(ctx, e, rec, now)
	case sandbox.StatePaused:
		err = m.samplePaused(ctx, rec, now)
	}
	if err != nil && !stale(err) {
		m.log.warn(rec.ID, "metering", err)
	}
	return err
}

// Meter samples every live and paused sandbox of this node, then ends the
// sandboxes of keys past their daily limit and of trials past their hours.
// A fenced node bills nothing: it cannot tell whether its records are its
// own any more.
func (m *Manager) Meter(ctx context.Context) {
	if m.Fenced() {
		return
	}
	recs, err := m.mine(ctx, sandbox.StateRunning, sandbox.StatePaused)
	if err != nil {
		m.cfg.Logger.Warn("listing sandboxes to meter", "err", err)
		return
	}
	for _, r := range recs {
		if r.State == sandbox.StatePaused && m.cfg.Prices.StorageNanosPerGiBHour == 0 {
			continue
		}
		// A sandbox busy with an operation is sampled at the next pass
		// (or settled by the operation): the sample covers the time since
		// the last one.
		e := m.tryLock(r.ID)
		if e == nil {
			continue
		}
		if rec, err := m.cfg.Store.GetSandbox(ctx, r.ID); err == nil && m.ownsRecord(rec) && (rec.State != sandbox.StateRunning || e.inst != nil) {
			if err := m.settle(ctx, e, rec, m.now()); stale(err) {
				m.dropStale(ctx, e, rec)
			}
		}
		e.mu.Unlock()
	}
	m.enforceLimits(ctx, recs)
}
