package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// The fake's snapshots: a file in the snapshot's directory that names the
// sandbox it was taken of; a start from it reads that file, as gVisor's
// restore reads its checkpoint.

var _ sandbox.Snapshotter = (*fakeBackend)(nil)

const fakeImage = "fake.img"

func (b *fakeBackend) Snapshot(ctx context.Context, id, dir string) error {
	if err := b.begin("snapshot", id); err != nil {
		return err
	}
	b.mu.Lock()
	box := b.boxes[id]
	running := box != nil && box.state == sandbox.StateRunning
	b.mu.Unlock()
	if !running {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s is not running here", id)
	}
	return os.WriteFile(filepath.Join(dir, fakeImage), []byte("snapshot of "+id), 0o600)
}

func (b *fakeBackend) StartSnapshot(ctx context.Context, id string, spec sandbox.Spec, dir string) (sandbox.Instance, error) {
	if err := b.begin("start_snapshot", id); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, fakeImage))
	if err != nil {
		return nil, fmt.Errorf("no snapshot in %s: %w", dir, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if box := b.boxes[id]; box != nil && box.state == sandbox.StateRunning {
		return nil, fmt.Errorf("sandbox %s runs already", id)
	}
	box := &fakeBox{state: sandbox.StateRunning, inst: newFakeInstance(), from: string(data)}
	box.inst.agent = b.agent
	b.boxes[id] = box
	return box.inst, nil
}

// startedFrom is what the snapshot box id started from said ("" when it
// booted afresh or is gone).
func (b *fakeBackend) startedFrom(id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if box := b.boxes[id]; box != nil {
		return box.from
	}
	return ""
}
