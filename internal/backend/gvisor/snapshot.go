package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/withruntime/withruntime/internal/agentlink"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/undo"
)

var _ sandbox.Snapshotter = (*Backend)(nil)

// Snapshot implements sandbox.Snapshotter: a pause's checkpoint (the
// agent lets go of its host connections first, since gVisor cannot save
// them) that leaves the sandbox running. runsc stops the sandbox's
// processes for the save and lets them go on; the agent then dials a new
// listener of the same link. What runsc writes holds the memory, the
// processes and the root overlay (its filestore is saved with the
// memory), so a snapshot needs nothing of the source to start.
func (b *Backend) Snapshot(ctx context.Context, id, dir string) error {
	b.mu.Lock()
	inst := b.instances[id]
	b.mu.Unlock()
	if inst == nil {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s is not running here", id)
	}
	err := inst.link.dir.ClearResume()
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, suspendWait)
		err = inst.link.listener().Suspend(sctx)
		cancel()
		if err != nil {
			err = fmt.Errorf("suspending agent: %w", err)
		}
	}
	if err == nil {
		_, err = b.runsc(ctx, id, nil, "checkpoint", "--leave-running", "--image-path", dir, id)
	}
	// Whatever happened, the agent goes on with a new listener.
	if lerr := inst.link.relisten(); lerr != nil {
		return errors.Join(err, lerr)
	}
	if rerr := inst.link.dir.SetResume(); rerr != nil {
		return errors.Join(err, rerr)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if rerr := inst.link.listener().Ready(rctx); rerr != nil {
		return errors.Join(err, fmt.Errorf("the agent did not come back after the snapshot: %w", rerr))
	}
	return err
}

// StartSnapshot implements sandbox.Snapshotter: a resume's restore under a
// new id, with the new sandbox's own dirs, listener, namespace and
// address. The snapshot stays as it is.
func (b *Backend) StartSnapshot(ctx context.Context, id string, spec sandbox.Spec, dir string) (_ sandbox.Instance, retErr error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := b.paths(id)
	var u undo.List
	defer u.Run(&retErr)
	u.Add(func() { b.Destroy(context.WithoutCancel(ctx), id) })
	inst, err := b.restore(ctx, id, p, spec, fdPath(f), &u)
	if err != nil {
		return nil, err
	}
	if _, err := agentlink.Reseed(ctx, inst.DialAgent, nil); err != nil {
		// The undo list closes its link, once.
		b.mu.Lock()
		delete(b.instances, id)
		b.mu.Unlock()
		return nil, err
	}
	return inst, nil
}
