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
	var p sandbox.Preview
	rec, err := m.changeKept(ctx, account, id, "change the previews of", func(_ *entry, rec *sandbox.Record) error {
		if rec.Preview != nil {
			p = *rec.Preview
			p.PublicPorts = append([]int(nil), p.PublicPorts...)
		}
		if err := change(&p); err != nil {
			return err
		}
		rec.Preview = &p
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.log.info(id, "preview settings changed", "public_ports", p.PublicPorts, "generation", p.Generation)
	return rec, nil
}

// Lookup returns the record of id whatever its account (service.Ports).
func (m *Manager) Lookup(ctx context.Context, id string) (*sandbox.Record, error) {
	return m.get(ctx, "", id)
}
