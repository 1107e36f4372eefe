package gvisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// suspendWait bounds the agent's suspend: it lets running requests finish
// for two seconds, then closes them.
const suspendWait = 10 * time.Second

// Pause implements sandbox.Backend. gVisor cannot checkpoint a connection
// to the host, so the agent lets go of every one first (agentlink's
// suspend), and waits for the resume flag after the restore.
func (b *Backend) Pause(ctx context.Context, id string) error {
	p := b.paths(id)
	b.mu.Lock()
	inst := b.instances[id]
	delete(b.instances, id)
	b.mu.Unlock()
	if inst == nil {
		return fmt.Errorf("sandbox %s is not running here", id)
	}
	err := inst.link.dir.ClearResume()
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, suspendWait)
		err = inst.link.host.Suspend(sctx)
		cancel()
	}
	inst.link.close()
	if err != nil {
		return fmt.Errorf("suspending agent: %w", err)
	}
	os.RemoveAll(p.checkpoint)
	if err := os.MkdirAll(p.checkpoint, 0o700); err != nil {
		return err
	}
	if _, err := b.runsc(ctx, id, nil, "checkpoint", "--image-path", p.checkpoint, id); err != nil {
		return err
	}
	b.stopContainer(ctx, id, p)
	removeCgroups(id)
	b.detachNetwork(id, p)
	return network.RemoveNamespace(p.netns)
}

// Resume implements sandbox.Backend.
func (b *Backend) Resume(ctx context.Context, id string, spec sandbox.Spec) (_ sandbox.Instance, retErr error) {
	p := b.paths(id)
	if _, err := os.Stat(filepath.Join(p.checkpoint, "checkpoint.img")); err != nil {
		return nil, fmt.Errorf("no checkpoint for %s", id)
	}
	defer func() {
		if retErr != nil {
			b.stopContainer(context.WithoutCancel(ctx), id, p)
			b.detachNetwork(id, p)
			network.RemoveNamespace(p.netns)
		}
	}()
	// Restored, a sandbox has the normal CPU priority whatever it booted
	// with.
	ln, err := b.prepare(id, p, spec, false)
	if err != nil {
		return nil, err
	}
	if err := b.runscDetached(ctx, id, &spec, "restore", "--detach", "--image-path", p.checkpoint, "--bundle", p.bundle, "--pid-file", p.pidFile, id); err != nil {
		ln.close()
		return nil, err
	}
	if err := ln.dir.SetResume(); err != nil {
		ln.close()
		return nil, err
	}
	inst, err := b.connect(ctx, id, p, ln, 30*time.Second)
	if err != nil {
		return nil, err
	}
	os.RemoveAll(p.checkpoint)
	return inst, nil
}
