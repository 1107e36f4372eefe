package manager

import (
	"context"
	"net/netip"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
)

var _ egress.Directory = (*Manager)(nil)

// networkFor validates a requested policy (the zero policy, no internet,
// is what a create without one asks for).
func (m *Manager) networkFor(n sandbox.Network) (sandbox.Network, error) {
	if !n.Internet && len(n.Allow) > 0 {
		return sandbox.Network{}, invalid("network.allow needs internet: true")
	}
	if n.Internet {
		if !m.backend().Supports(sandbox.CapNetwork) || !m.cfg.Egress {
			return sandbox.Network{}, sandbox.Errorf(sandbox.KindNotSupported, "this server offers no network access to sandboxes")
		}
	}
	if err := egress.ValidateAllow(n.Allow); err != nil {
		return sandbox.Network{}, invalid("network.allow: %v", err)
	}
	return sandbox.Network{Internet: n.Internet, Allow: append([]string(nil), n.Allow...)}, nil
}

// SandboxByAddr implements egress.Directory: the sandbox behind a
// sandbox-side address, with its policy as it is now.
func (m *Manager) SandboxByAddr(addr netip.Addr) (egress.Sandbox, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byAddr[addr]
	if e == nil {
		return egress.Sandbox{}, false
	}
	return egress.Sandbox{ID: e.id, Account: e.account, Policy: egress.Policy{Internet: e.network.Internet, Allow: e.network.Allow}}, true
}

// indexAddr records the sandbox-side address of a live entry.
func (m *Manager) indexAddr(e *entry, n sandbox.Network) {
	if !m.backend().Supports(sandbox.CapNetwork) {
		return
	}
	addr, ok := m.backend().SandboxAddr(e.id)
	m.mu.Lock()
	defer m.mu.Unlock()
	e.network = n
	if ok {
		e.addr = addr
		m.byAddr[addr] = e
	}
}

// unindexAddrLocked forgets it; the caller holds m.mu.
func (m *Manager) unindexAddrLocked(e *entry) {
	if e.addr.IsValid() && m.byAddr[e.addr] == e {
		delete(m.byAddr, e.addr)
	}
	e.addr = netip.Addr{}
}

// SetNetwork changes the policy of a running or paused sandbox; new
// connections and DNS queries follow it at once.
func (m *Manager) SetNetwork(ctx context.Context, account, id string, n sandbox.Network) (out *sandbox.Record, err error) {
	ctx, span := m.startOp(ctx, "set_network", account, id)
	defer span.end(&out, &err)
	policy, err := m.networkFor(n)
	if err != nil {
		return nil, err
	}
	rec, err := m.changeKept(ctx, account, id, "change the network of", func(e *entry, rec *sandbox.Record) error {
		if rec.State == sandbox.StateRunning && e.inst != nil {
			if m.backend().Supports(sandbox.CapNetwork) {
				if err := m.backend().SetOnline(id, policy.Internet); err != nil {
					return err
				}
			}
			m.mu.Lock()
			e.network = policy
			m.mu.Unlock()
		}
		rec.Spec.Network = policy
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.log.info(id, "network policy changed", "internet", policy.Internet, "allow", len(policy.Allow))
	return rec, nil
}

// changeKept applies change to the record of a running or paused sandbox
// of this node, under its lock, and writes it: what a change of its
// settings (network, previews) shares. op says what is refused ("change
// the network of").
func (m *Manager) changeKept(ctx context.Context, account, id, op string, change func(e *entry, rec *sandbox.Record) error) (*sandbox.Record, error) {
	if err := m.serving(); err != nil {
		return nil, err
	}
	e := m.lock(id)
	defer e.mu.Unlock()
	rec, err := m.get(ctx, account, id)
	if err != nil {
		return nil, err
	}
	if rec.State != sandbox.StateRunning && rec.State != sandbox.StatePaused {
		return nil, stateError(rec, op)
	}
	if !m.ownsRecord(rec) {
		return nil, elsewhere(rec, op)
	}
	if err := change(e, rec); err != nil {
		return nil, err
	}
	if err := m.cfg.Store.PutSandbox(ctx, rec); err != nil {
		if stale(err) {
			return nil, m.dropStale(ctx, e, rec)
		}
		return nil, err
	}
	return rec, nil
}

// Egress returns the sandbox's egress log, newest last.
func (m *Manager) Egress(ctx context.Context, account, id string) ([]egress.Event, error) {
	if _, err := m.get(ctx, account, id); err != nil {
		return nil, err
	}
	out := []egress.Event{}
	if m.cfg.EgressState == nil {
		return out, nil
	}
	return append(out, m.cfg.EgressState.Events(id)...), nil
}
