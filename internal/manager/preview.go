package manager

import (
	"context"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// SetPreview changes the preview settings of a running or paused sandbox:
// change gets a copy of them to edit.
func (m *Manager) SetPreview(ctx context.Context, account, id string, change func(*sandbox.Preview) error) (out *sandbox.Record, err error) {
	ctx, span := m.startOp(ctx, "set_preview", account, id)
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
	if rec.State != sandbox.StateRunning && rec.State != sandbox.StatePaused {
		return nil, stateError(rec, "change the previews of")
	}
	if !m.ownsRecord(rec) {
		return nil, elsewhere(rec, "change the previews of")
	}
	var p sandbox.Preview
	if rec.Preview != nil {
		p = *rec.Preview
		p.PublicPorts = append([]int(nil), p.PublicPorts...)
	}
	if err := change(&p); err != nil {
		return nil, err
	}
	rec.Preview = &p
	if err := m.cfg.Store.PutSandbox(ctx, rec); err != nil {
		if stale(err) {
			return nil, m.dropStale(ctx, e, rec)
		}
		return nil, err
	}
	m.log.info(id, "preview settings changed", "public_ports", p.PublicPorts, "generation", p.Generation)
	return rec, nil
}

// Lookup returns the record of id whatever its account (service.Ports).
func (m *Manager) Lookup(ctx context.Context, id string) (*sandbox.Record, error) {
	return m.get(ctx, "", id)
}
