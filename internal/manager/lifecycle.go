package manager

import (
	"context"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// The manager is the sandboxes of one box, and of one node (internal/node
// serves its Acts).
var _ service.Sandboxes = (*Manager)(nil)

// Create validates, admits and starts a sandbox. A refused or failed
// create leaves nothing behind: not a record, not a sandbox on the backend.
func (m *Manager) Create(ctx context.Context, account, keyID string, req service.CreateRequest) (out *sandbox.Record, err error) {
	ctx, span := m.startOp(ctx, "create", account, "")
	defer span.end(&out, &err)
	start, isolation, pooled := time.Now(), req.Isolation, false
	defer func() { m.observeCreate(start, isolation, pooled, err) }()
	if err := m.serving(); err != nil {
		return nil, err
	}
	var spec sandbox.Spec
	var from *sandbox.Snapshot
	if req.Snapshot != "" {
		spec, from, err = m.fromSnapshot(ctx, account, req)
	} else {
		spec, err = m.specFor(ctx, account, req)
	}
	if err != nil {
		return nil, err
	}
	isolation = spec.Isolation
	acct, err := m.checkMoney(ctx, account, keyID, spec, 0)
	if err != nil {
		return nil, err
	}
	m.pools.creating.Add(1)
	m.pools.busy()
	defer m.pools.busy()
	defer m.pools.creating.Add(-1)
	t := tenant{account: account, trial: acct.TrialSeconds > 0}
	if from == nil {
		if rec, ok, err := m.claimPool(ctx, t, keyID, acct.Concurrency, spec); ok {
			pooled = true
			return rec, err
		}
	}
	id := newID()
	e := m.lock(id)
	defer e.mu.Unlock()
	if err := m.admitOrEvict(e, t, spec); err != nil {
		return nil, err
	}
	now := m.now()
	rec := &sandbox.Record{
		ID: id, Account: account, KeyID: keyID, Backend: spec.Isolation, Spec: spec,
		CreatedAt: now, LeaseEndsAt: now.Add(spec.Timeout),
		Node: m.cfg.Node, NodeEpoch: m.epoch.Load(),
	}
	// The store counts the account's live sandboxes on every node.
	err = rec.Move(sandbox.StateStarting)
	if err == nil {
		err = m.cfg.Store.AdmitSandbox(ctx, rec, acct.Concurrency)
	}
	if err != nil {
		m.release(e)
		return nil, err
	}
	inst, err := m.startBackend(ctx, id, spec, from)
	if err != nil {
		m.log.warn(id, "starting sandbox", err)
		// The id is new: whatever the backend made of it is this call's.
		if err := m.backend().Destroy(context.WithoutCancel(ctx), id); err != nil {
			m.log.warn(id, "destroying a sandbox that did not start", err)
		}
		m.release(e)
		m.cfg.Store.DeleteSandbox(context.WithoutCancel(ctx), id)
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "the sandbox could not be started")
	}
	m.attach(e, inst)
	m.indexAddr(e, spec.Network)
	started := m.now()
	running := *rec
	running.StartedAt = &started
	running.Usage.SampledAt, running.Usage.CPUCounterNs = started, 0
	// A transition the table refused is handled as a start that could not
	// be recorded.
	err = running.Move(sandbox.StateRunning)
	if err == nil {
		err = m.cfg.Store.PutSandbox(context.WithoutCancel(ctx), &running)
	}
	if err != nil {
		if stale(err) {
			return nil, m.dropStale(ctx, e, &running)
		}
		// Unrecorded, it would run unbilled: it goes.
		m.log.warn(id, "recording the start", err)
		m.finish(ctx, e, sandbox.EndError, "recording the start failed")
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "the sandbox's start could not be recorded; it was stopped")
	}
	if err := m.afterStart(ctx, e, spec, from, len(req.Env) > 0); err != nil {
		m.log.warn(id, "starting the template's commands", err)
		m.finish(context.WithoutCancel(ctx), e, sandbox.EndError, "the template's start or ready command failed")
		return nil, err
	}
	m.log.info(id, "sandbox started", "vcpus", spec.VCPUs, "memory_mib", spec.MemoryMiB, "startup_ms", started.Sub(now).Milliseconds())
	return &running, nil
}

// Get returns a sandbox of the account.
func (m *Manager) Get(ctx context.Context, account, id string) (*sandbox.Record, error) {
	return m.get(ctx, account, id)
}

// List returns the account's sandboxes.
func (m *Manager) List(ctx context.Context, account string) ([]*sandbox.Record, error) {
	return m.list(ctx, account)
}

// Extend moves the lease of a running sandbox to end timeout from now, or
// leaves it where it is when it already ends later: an extend never
// shortens a lease, so a client that asks for "at least N more seconds"
// cannot cut short what another one asked for. max_cost_micros is checked
// against the lease asked for, as before.
func (m *Manager) Extend(ctx context.Context, account, id string, timeout time.Duration) (out *sandbox.Record, err error) {
	ctx, span := m.startOp(ctx, "extend", account, id)
	defer span.end(&out, &err)
	return m.moveLease(ctx, account, id, timeout, false)
}

// SetLease moves the lease of a running sandbox to end timeout from now,
// sooner or later than it did (E2B's setTimeout: the caller owns the
// sandbox's lifetime outright).
func (m *Manager) SetLease(ctx context.Context, account, id string, timeout time.Duration) (out *sandbox.Record, err error) {
	ctx, span := m.startOp(ctx, "set_lease", account, id)
	defer span.end(&out, &err)
	return m.moveLease(ctx, account, id, timeout, true)
}

// moveLease is Extend, or with exact SetLease.
func (m *Manager) moveLease(ctx context.Context, account, id string, timeout time.Duration, exact bool) (*sandbox.Record, error) {
	if err := m.checkTimeout(int(timeout/time.Second), timeout); err != nil {
		return nil, err
	}
	if err := m.serving(); err != nil {
		return nil, err
	}
	e := m.lock(id)
	defer e.mu.Unlock()
	rec, err := m.get(ctx, account, id)
	if err != nil {
		return nil, err
	}
	if rec.State != sandbox.StateRunning {
		return nil, stateError(rec, "extend")
	}
	if !m.ownsRecord(rec) {
		return nil, elsewhere(rec, "extend")
	}
	if err := m.settle(ctx, e, rec, m.now()); stale(err) {
		return nil, m.dropStale(ctx, e, rec)
	}
	if err := m.checkMaxCost(rec.Spec, rec.Usage.CostNanos, timeout); err != nil {
		return nil, err
	}
	if end := m.now().Add(timeout); exact || end.After(rec.LeaseEndsAt) {
		rec.LeaseEndsAt = end
	}
	if err := m.cfg.Store.PutSandbox(ctx, rec); err != nil {
		if stale(err) {
			return nil, m.dropStale(ctx, e, rec)
		}
		return nil, err
	}
	return rec, nil
}

// Stop ends a sandbox (running or paused) with reason stopped. Stopping an
// ended sandbox returns it as it is.
func (m *Manager) Stop(ctx context.Context, account, id string) (*sandbox.Record, error) {
	return m.stopAs(ctx, account, id, sandbox.EndStopped)
}

// EndRetention ends a paused sandbox whose retention is over with reason
// retention_ended, as the reaper does, on any node that may stop it: the
// failure detector asks a live node so for a lost node's shared
// checkpoint, which no reaper would remove otherwise. Anything else is
// refused (conflict).
func (m *Manager) EndRetention(ctx context.Context, id string) (*sandbox.Record, error) {
	return m.stopAs(ctx, "", id, sandbox.EndRetentionEnded)
}

func (m *Manager) stopAs(ctx context.Context, account, id string, reason sandbox.EndReason) (out *sandbox.Record, err error) {
	ctx, span := m.startOp(ctx, "stop", account, id)
	defer span.end(&out, &err)
	e := m.lock(id)
	defer e.mu.Unlock()
	rec, err := m.get(ctx, account, id)
	if err != nil {
		return nil, err
	}
	if rec.State == sandbox.StateEnded {
		return rec, nil
	}
	// A paused sandbox whose checkpoint is shared is any node's to stop
	// (its own node may be gone): the checkpoint goes with it.
	if !m.ownsRecord(rec) && !(sharedCheckpoint(rec) && m.cfg.SharedCheckpoints) {
		return nil, elsewhere(rec, "stop")
	}
	if reason == sandbox.EndRetentionEnded && (rec.State != sandbox.StatePaused || rec.RetentionEndsAt == nil || m.now().Before(*rec.RetentionEndsAt)) {
		return nil, sandbox.Errorf(sandbox.KindConflict, "the retention of sandbox %s is not over", id)
	}
	return m.finish(ctx, e, reason, "")
}

// Pause checkpoints a running sandbox.
func (m *Manager) Pause(ctx context.Context, account, id string) (out *sandbox.Record, err error) {
	ctx, span := m.startOp(ctx, "pause", account, id)
	defer span.end(&out, &err)
	e, rec, err := m.lockRunning(ctx, account, id, "pause")
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	if err := pausable(rec.Spec); err != nil {
		return nil, err
	}
	return m.pause(ctx, e, rec)
}

// lockRunning locks the entry of account's sandbox id for op, which only
// a running sandbox this manager holds allows; on success the caller
// unlocks e.mu.
func (m *Manager) lockRunning(ctx context.Context, account, id, op string) (*entry, *sandbox.Record, error) {
	if err := m.serving(); err != nil {
		return nil, nil, err
	}
	e := m.lock(id)
	rec, err := m.get(ctx, account, id)
	switch {
	case err != nil:
	case rec.State == sandbox.StateRunning && !m.ownsRecord(rec):
		err = elsewhere(rec, op)
	case rec.State != sandbox.StateRunning || e.inst == nil:
		err = stateError(rec, op)
	}
	if err != nil {
		e.mu.Unlock()
		return nil, nil, err
	}
	return e, rec, nil
}

// pause checkpoints; the caller holds e.mu. A failed checkpoint ends the
// sandbox with reason error: nothing is left half-paused. A checkpoint the
// store cannot record is resumed again, so that the sandbox is what its
// record says (running, billed as such); when that fails too it is ended.
func (m *Manager) pause(ctx context.Context, e *entry, rec *sandbox.Record) (*sandbox.Record, error) {
	ctx = context.WithoutCancel(ctx)
	// Before the checkpoint: the CPU counter goes with the cgroup. Billing
	// switches from running to paused at this moment.
	now := m.now()
	if err := m.settle(ctx, e, rec, now); stale(err) {
		return nil, m.dropStale(ctx, e, rec)
	}
	if err := m.backend().Pause(ctx, e.id); err != nil {
		m.log.warn(e.id, "pausing sandbox", err)
		m.finish(ctx, e, sandbox.EndError, "the sandbox could not be paused")
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "the sandbox could not be paused and was stopped")
	}
	spec, account := rec.Spec, rec.Account
	m.release(e)
	m.closeFlows(e.id)
	paused := *rec
	retention := now.Add(m.cfg.Retention)
	paused.PausedAt, paused.RetentionEndsAt = &now, &retention
	paused.Usage.SampledAt = now
	paused.Checkpoint = nil
	digest := m.backend().CheckpointDigest(e.id)
	if m.cfg.SharedCheckpoints {
		// The backend left it in the shared storage: any node that can
		// restore it may resume it, once it checked it is this one.
		paused.Checkpoint = &sandbox.Checkpoint{Shared: true, Compat: m.cfg.NodeCompat, Digest: digest}
	}
	// A transition the table refused is handled as a pause that could not
	// be recorded.
	err := paused.Move(sandbox.StatePaused)
	if err == nil {
		err = m.cfg.Store.PutSandbox(ctx, &paused)
	}
	if err != nil {
		if stale(err) {
			// Its checkpoint goes too: the record is not ours to pause.
			return nil, m.dropStale(ctx, e, rec)
		}
		m.log.warn(e.id, "recording the pause", err)
		if m.undoPause(ctx, e, account, spec) {
			return nil, sandbox.Wrap(sandbox.KindInternal, err, "the pause could not be recorded; the sandbox keeps running")
		}
		m.finish(ctx, e, sandbox.EndError, "the pause could not be recorded")
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "the pause could not be recorded; the sandbox was stopped")
	}
	m.log.info(e.id, "sandbox paused")
	return &paused, nil
}

// undoPause resumes a sandbox whose pause was not recorded; it reports
// whether it runs again. It is counted again without being refused: its
// room was its own a moment ago. The caller holds e.mu.
func (m *Manager) undoPause(ctx context.Context, e *entry, account string, spec sandbox.Spec) bool {
	inst, err := m.backend().Resume(ctx, e.id, spec)
	if err != nil {
		m.log.warn(e.id, "resuming a sandbox whose pause was not recorded", err)
		return false
	}
	m.admitRecovered(ctx, e, &sandbox.Record{Account: account, Spec: spec})
	m.attach(e, inst)
	m.indexAddr(e, spec.Network)
	return true
}

// Resume restores a paused sandbox; its lease then runs its full timeout
// again from now. The record is read once the lock is held: a sandbox that
// another call resumed, stopped or ended meanwhile is a conflict. A paused
// sandbox of another node is resumed here when its checkpoint is in the
// shared storage and this node can restore it; it is this node's then.
//
// The record is admitted as starting before the backend restores it: the
// store counts it against the account's concurrency on every node, and of
// two nodes resuming one shared checkpoint only the first write wins, so
// the sandbox never runs twice.
func (m *Manager) Resume(ctx context.Context, account, id string) (*sandbox.Record, error) {
	return m.resume(ctx, account, id, false)
}

// resume is Resume; woken says the call is an auto-resume (wake), for
// which a sandbox that another call resumed meanwhile is what it wanted.
func (m *Manager) resume(ctx context.Context, account, id string, woken bool) (out *sandbox.Record, err error) {
	op := "resume"
	if woken {
		op = "auto_resume"
	}
	ctx, span := m.startOp(ctx, op, account, id)
	defer span.end(&out, &err)
	if err := m.serving(); err != nil {
		return nil, err
	}
	e := m.lock(id)
	defer e.mu.Unlock()
	rec, err := m.get(ctx, account, id)
	if err != nil {
		return nil, err
	}
	if woken && rec.State == sandbox.StateRunning {
		return rec, nil
	}
	if rec.State != sandbox.StatePaused || e.inst != nil {
		return nil, stateError(rec, "resume")
	}
	if err := m.canRestore(rec); err != nil {
		return nil, err
	}
	// Billing switches from paused to running at this moment.
	switched := m.now()
	if err := m.settle(ctx, e, rec, switched); stale(err) {
		return nil, m.dropStale(ctx, e, rec)
	}
	acct, err := m.checkMoney(ctx, rec.Account, rec.KeyID, rec.Spec, rec.Usage.CostNanos)
	if err != nil {
		return nil, err
	}
	m.pools.creating.Add(1)
	m.pools.busy()
	defer m.pools.busy()
	defer m.pools.creating.Add(-1)
	if err := m.admitOrEvict(e, tenant{account: rec.Account, trial: acct.TrialSeconds > 0}, rec.Spec); err != nil {
		return nil, err
	}
	starting := *rec
	starting.Node, starting.NodeEpoch = m.cfg.Node, m.epoch.Load()
	err = starting.Move(sandbox.StateStarting)
	if err == nil {
		err = m.cfg.Store.AdmitSandbox(ctx, &starting, acct.Concurrency)
	}
	if err != nil {
		m.release(e)
		if stale(err) {
			return nil, sandbox.Errorf(sandbox.KindConflict, "sandbox %s changed meanwhile (another node may have resumed it)", id)
		}
		return nil, err
	}
	inst, err := m.restore(ctx, rec)
	if err != nil {
		m.release(e)
		m.putBackPaused(ctx, id, rec, starting.Version)
		m.log.warn(id, "resuming sandbox", err)
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "the sandbox could not be resumed; it stays paused")
	}
	m.attach(e, inst)
	m.indexAddr(e, rec.Spec.Network)
	running, err := m.recordResumed(ctx, e, &starting, rec, switched)
	if err != nil {
		return nil, err
	}
	m.log.info(id, "sandbox resumed", "from_node", rec.Node, "auto", woken)
	return running, nil
}

// restore has the backend restore a paused record's checkpoint; a shared
// one only when it is still what the pause saved (its digest, when the
// backend takes them): the shared storage is written by every node.
func (m *Manager) restore(ctx context.Context, rec *sandbox.Record) (sandbox.Instance, error) {
	if cp := rec.Checkpoint; m.backend().Supports(sandbox.CapDigest) && cp != nil && cp.Shared && cp.Digest != "" {
		return m.backend().ResumeDigest(ctx, rec.ID, withIsolation(rec), cp.Digest)
	}
	return m.backend().Resume(ctx, rec.ID, withIsolation(rec))
}

// recordResumed records a restored sandbox (attached already) running,
// from the starting record its resume wrote; billing as running counts
// from switched. When the store cannot record it, it is paused again and
// paused (the record as it was before the resume) is put back. The caller
// holds e.mu.
func (m *Manager) recordResumed(ctx context.Context, e *entry, starting, paused *sandbox.Record, switched time.Time) (*sandbox.Record, error) {
	id := e.id
	now := m.now()
	running := *starting
	running.PausedAt, running.RetentionEndsAt = nil, nil
	running.Checkpoint = nil
	running.LeaseEndsAt = now.Add(starting.Spec.Timeout)
	running.Usage.SampledAt, running.Usage.CPUCounterNs = switched, 0
	// A transition the table refused is handled as a resume that could
	// not be recorded.
	err := running.Move(sandbox.StateRunning)
	if err == nil {
		err = m.cfg.Store.PutSandbox(context.WithoutCancel(ctx), &running)
	}
	if err == nil {
		return &running, nil
	}
	if stale(err) {
		return nil, m.dropStale(ctx, e, &running)
	}
	// Unrecorded, it would run billed as paused: it is paused again.
	m.log.warn(id, "recording the resume", err)
	if perr := m.backend().Pause(context.WithoutCancel(ctx), id); perr != nil {
		m.log.warn(id, "pausing a sandbox whose resume was not recorded", perr)
		m.finish(ctx, e, sandbox.EndError, "the resume could not be recorded")
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "the resume could not be recorded; the sandbox was stopped")
	}
	m.release(e)
	m.closeFlows(id)
	m.putBackPaused(ctx, id, paused, starting.Version)
	return nil, sandbox.Wrap(sandbox.KindInternal, err, "the resume could not be recorded; the sandbox stays paused")
}

// putBackPaused writes paused again over the starting record (of version
// version) that a resume that did not happen wrote, and reports whether
// it did. A record left starting is taken up by the reaper
// (recoverStarting).
func (m *Manager) putBackPaused(ctx context.Context, id string, paused *sandbox.Record, version int64) error {
	back := *paused
	back.Version = version
	err := m.cfg.Store.PutSandbox(context.WithoutCancel(ctx), &back)
	if err != nil {
		m.log.warn(id, "recording that the sandbox stays paused", err)
	}
	return err
}

// canRestore refuses the resume of a paused record whose checkpoint this
// node cannot restore: one on another node's own disk, or one made with
// another runsc build or other CPU features.
func (m *Manager) canRestore(rec *sandbox.Record) error {
	cp := rec.Checkpoint
	if cp == nil || !cp.Shared {
		if !m.ownsRecord(rec) {
			return sandbox.Errorf(sandbox.KindConflict, "the checkpoint of sandbox %s is on the disk of node %s; only that node can resume it", rec.ID, rec.Node)
		}
		return nil
	}
	if !m.cfg.SharedCheckpoints {
		return sandbox.Errorf(sandbox.KindConflict, "the checkpoint of sandbox %s is in the shared checkpoint storage, which this node does not use", rec.ID)
	}
	if cp.Compat != m.cfg.NodeCompat {
		return sandbox.Errorf(sandbox.KindConflict, "the checkpoint of sandbox %s was made on node %s with %s; this node offers %s", rec.ID, rec.Node, cp.Compat, m.cfg.NodeCompat)
	}
	return nil
}

// Agent returns a round tripper to a running sandbox's agent; a paused
// one that resumes on use is resumed first (wake).
func (m *Manager) Agent(ctx context.Context, account, id string) (http.RoundTripper, error) {
	if err := m.serving(); err != nil {
		return nil, err
	}
	m.pools.busy()
	// The transport is read before the record: a sandbox paused or ended
	// in between is refused for what its record says.
	t := m.transport(id)
	rec, err := m.get(ctx, account, id)
	if err != nil {
		return nil, err
	}
	if wakes(rec) {
		if rec, err = m.resume(ctx, account, id, true); err != nil {
			return nil, err
		}
		t = m.transport(id)
	}
	if rec.State == sandbox.StateRunning && !m.ownsRecord(rec) {
		return nil, elsewhere(rec, "use")
	}
	if rec.State != sandbox.StateRunning || t == nil {
		return nil, stateError(rec, "use")
	}
	return t, nil
}

// transport is the agent transport of the sandbox id this manager holds,
// or nil.
func (m *Manager) transport(id string) *http.Transport {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.live[id]; e != nil {
		return e.transport
	}
	return nil
}

// wakes says whether a call that needs rec's sandbox running resumes it
// first (under its lock, so that of many such calls one resumes it and
// the others wait for it): it was created to resume on use, and is paused
// or starting (another call resuming it now). An ended one never does.
func wakes(rec *sandbox.Record) bool {
	return rec.Spec.AutoResume && (rec.State == sandbox.StatePaused || rec.State == sandbox.StateStarting)
}

// stateError says why an operation is refused in the record's state.
func stateError(rec *sandbox.Record, op string) error {
	if rec.State == sandbox.StateEnded && rec.EndReason == sandbox.EndLeaseEnded {
		return sandbox.Errorf(sandbox.KindLeaseEnded, "cannot %s sandbox %s: its lease ended", op, rec.ID)
	}
	if rec.State == sandbox.StateEnded {
		return sandbox.Errorf(sandbox.KindConflict, "cannot %s sandbox %s: it has ended (%s)", op, rec.ID, rec.EndReason)
	}
	return sandbox.Errorf(sandbox.KindConflict, "cannot %s sandbox %s while it is %s", op, rec.ID, rec.State)
}
