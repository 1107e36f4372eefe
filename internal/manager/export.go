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
	e, rec, err := m.lockRunning(ctx, account, id, "snapshot")
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	if err := m.backend().ExportRoot(ctx, id, w); err != nil {
		return nil, err
	}
	return rec, nil
}
