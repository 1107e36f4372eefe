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
	i, err := b.running(id)
	if err != nil {
		return err
	}
	return i.qmp.run(cmd, nil, nil)
}

// running is sandbox id's live instance.
func (b *Backend) running(id string) (*instance, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := b.instances[id]; i != nil {
		return i, nil
	}
	return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s is not running here", id)
}
