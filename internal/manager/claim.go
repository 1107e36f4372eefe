package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// claimPool hands a create a warm member when one of its size is ready.
// ok is false when there is none, or when the member could not be given
// the create's settings (it is destroyed): the create then starts cold.
// A refusal (the account's concurrency, a share of the host) is returned
// with ok true, and the member goes back to its pool.
func (m *Manager) claimPool(ctx context.Context, t tenant, keyID string, concurrency int, spec sandbox.Spec) (rec *sandbox.Record, ok bool, err error) {
	key, match := m.poolKeyOf(spec)
	if !match {
		return nil, false, nil
	}
	for {
		mem := m.pools.take(key)
		if mem == nil {
			return nil, false, nil
		}
		m.pools.kick()
		e := m.lock(mem.id)
		if e.inst != mem.inst || isDone(mem.inst) {
			e.mu.Unlock() // it died while it waited; its watcher removes it
			continue
		}
		if spec.Root != nil && mem.template != spec.Root.Template {
			// Its template's name means another template now.
			m.destroyLocked(e, "its template was replaced", true)
			e.mu.Unlock()
			continue
		}
		rec, ok, err := m.handOver(ctx, e, mem, t, keyID, concurrency, spec)
		e.mu.Unlock()
		return rec, ok, err
	}
}

// stopping reports whether Close has begun.
func (m *Manager) stopping() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

func isDone(inst sandbox.Instance) bool {
	select {
	case <-inst.Done():
		return true
	default:
		return false
	}
}

// handOver makes member mem the create's sandbox; the caller holds e.mu.
// Billing starts here: the record's start is now, and the CPU the boot
// used is the member's, not the account's. The member is taken for t
// within t's shares of the host (claimShare), and the record is admitted
// by the store (the account's concurrency on every node), before the
// member is given anything of the create, so that a refused member is as
// it was and goes back to its pool.
func (m *Manager) handOver(ctx context.Context, e *entry, mem *member, t tenant, keyID string, concurrency int, spec sandbox.Spec) (*sandbox.Record, bool, error) {
	account := t.account
	fail := func(what string, err error) (*sandbox.Record, bool, error) {
		m.log.warn(e.id, what, err)
		m.destroyLocked(e, what, true)
		return nil, false, nil
	}
	// The boot's CPU is nobody's: without the counter's value now, the
	// first sample would bill all of it to the account.
	var counter int64
	if m.backend().Supports(sandbox.CapMeter) {
		cpu, err := m.backend().CPUTime(e.id)
		if err != nil {
			return fail("reading a pool member's CPU counter", err)
		}
		counter = int64(cpu)
	}
	now := m.now()
	rec := &sandbox.Record{
		ID: e.id, Account: account, KeyID: keyID, Backend: spec.Isolation, Spec: spec,
		CreatedAt: now, StartedAt: &now, LeaseEndsAt: now.Add(spec.Timeout),
		Node: m.cfg.Node, NodeEpoch: m.epoch.Load(),
	}
	rec.Usage.SampledAt, rec.Usage.CPUCounterNs = now, counter
	if err := rec.Move(sandbox.StateRunning); err != nil {
		m.backToPool(e, mem)
		return nil, true, err
	}
	// Not the request's context: a client that goes away mid-claim would
	// otherwise cost a member.
	ctx = context.WithoutCancel(ctx)
	if err := m.claimShare(e, t, spec); err != nil {
		m.backToPool(e, mem)
		return nil, true, err
	}
	if err := m.cfg.Store.AdmitSandbox(ctx, rec, concurrency); err != nil {
		if sandbox.KindOf(err) == sandbox.KindConcurrency {
			m.mu.Lock()
			e.account, e.trial = "", false // nobody's again
			m.mu.Unlock()
			m.backToPool(e, mem)
			return nil, true, err
		}
		m.log.warn(e.id, "recording a claimed pool member", err)
		m.destroyLocked(e, "its record could not be written", true)
		return nil, true, sandbox.Wrap(sandbox.KindInternal, err, "the sandbox could not be recorded")
	}
	if err := m.applySpec(ctx, e, spec); err != nil {
		m.cfg.Store.DeleteSandbox(ctx, e.id)
		return fail("giving a pool member its settings", err)
	}
	m.indexAddr(e, spec.Network)
	m.log.info(e.id, "sandbox started", "vcpus", spec.VCPUs, "memory_mib", spec.MemoryMiB, "pool", true, "age_ms", now.Sub(mem.born).Milliseconds())
	return rec, true, nil
}

// claimShare makes the member of e t's, within t's shares of the host
// (checkShares, with the member's own room not counted twice). The
// caller holds e.mu.
func (m *Manager) claimShare(e *entry, t tenant, spec sandbox.Spec) error {
	free, err := m.diskFree()
	if err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "could not read the data dir's free disk space")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkShares(t, spec, m.hostRoom(free), e); err != nil {
		return err
	}
	e.account, e.trial = t.account, t.trial
	return nil
}

// backToPool puts a member a claim refused back in its pool, unless the
// filler has replaced it already or the server is stopping (Close has
// taken the members). The caller holds e.mu.
func (m *Manager) backToPool(e *entry, mem *member) {
	if m.stopping() || !m.pools.putBack(mem) {
		m.destroyLocked(e, "not needed back in its pool", false)
	}
}

// applySpec gives a member what a create sets at boot for a cold sandbox:
// its environment (through the agent), its CPU priority and its network
// (online when the policy has internet; the allow list is the manager's,
// indexed once the record exists).
func (m *Manager) applySpec(ctx context.Context, e *entry, spec sandbox.Spec) error {
	// The priority first: at the lowest, the agent's answer below would
	// wait behind every busy sandbox on the host.
	if err := m.backend().Claim(ctx, e.id); err != nil {
		return err
	}
	if len(spec.Env) > 0 {
		if err := m.putEnv(ctx, e, spec.Env); err != nil {
			return err
		}
	}
	if spec.Network.Internet {
		if !m.backend().Supports(sandbox.CapNetwork) {
			return fmt.Errorf("the backend has no network")
		}
		if err := m.backend().SetOnline(e.id, true); err != nil {
			return err
		}
	}
	return nil
}

// envTimeout bounds the agent's answer to the environment.
const envTimeout = 5 * time.Second

// putEnv sets the sandbox's environment in its agent.
func (m *Manager) putEnv(ctx context.Context, e *entry, env map[string]string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<" as itself, not six bytes: see the agent's maxEnvBody
	if err := enc.Encode(map[string]map[string]string{"env": env}); err != nil {
		return err
	}
	body := buf.Bytes()
	ctx, cancel := context.WithTimeout(ctx, envTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://agent/env", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("the agent answered the environment with %s", resp.Status)
	}
	return nil
}
