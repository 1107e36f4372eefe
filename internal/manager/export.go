package manager

import (
	"context"
	"io"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// ExportRoot writes what running sandbox id of account changed in its
// root file system to w, as an overlayfs-form tar stream
// (sandbox.RootExporter), and returns the sandbox's record as it was: its
// Spec.Root is what the stream lies over. The sandbox keeps running; it is
// held (no stop, pause or other export of it) until the stream is written
// or w refuses it.
func (m *Manager) ExportRoot(ctx context.Context, account, id string, w io.Writer) (out *sandbox.Record, err error) {
	ctx, span := m.startOp(ctx, "export_root", account, id)
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
	if rec.State == sandbox.StateRunning && !m.ownsRecord(rec) {
		return nil, elsewhere(rec, "snapshot")
	}
	if rec.State != sandbox.StateRunning || e.inst == nil {
		return nil, stateError(rec, "snapshot")
	}
	if err := m.backend().ExportRoot(ctx, id, w); err != nil {
		return nil, err
	}
	return rec, nil
}
