package microvm

import (
	"context"

	"github.com/withruntime/withruntime/internal/sandbox"
)

var _ sandbox.Freezer = (*Backend)(nil)

// Freeze implements sandbox.Freezer: QEMU stops running the guest (QMP
// stop); its memory stays.
func (b *Backend) Freeze(ctx context.Context, id string) error { return b.qmpRun(id, "stop") }

// Thaw implements sandbox.Freezer.
func (b *Backend) Thaw(ctx context.Context, id string) error { return b.qmpRun(id, "cont") }

func (b *Backend) qmpRun(id, cmd string) error {
	b.mu.Lock()
	i := b.instances[id]
	b.mu.Unlock()
	if i == nil {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s is not running here", id)
	}
	return i.qmp.run(cmd, nil, nil)
}
