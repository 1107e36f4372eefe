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
//
// With shared checkpoints the checkpoint is written to the shared dir and
// nothing of the sandbox stays in this node's dirs: the checkpoint holds
// the whole sandbox (memory, processes, and the root overlay, whose
// filestore is an unlinked file that runsc saves with the memory), and
// Resume writes the bundle, the link and the namespace anew from the
// spec. So any node whose backend has the same cache and shared dir can
// resume it, and no node's sweep finds a leftover of it to remove.
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
	dir := p.checkpoint
	if p.shared != "" {
		dir = sharedCheckpoint(p)
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := b.runsc(ctx, id, nil, "checkpoint", "--image-path", dir, id); err != nil {
		return err
	}
	b.stopContainer(ctx, id, p)
	removeCgroups(id)
	b.detachNetwork(id, p)
	err = network.RemoveNamespace(p.netns)
	if p.shared != "" {
		b.removeLocal(p)
	}
	return err
}

// sharedCheckpoint is where a sandbox's checkpoint is kept in the shared
// dir.
func sharedCheckpoint(p paths) string { return filepath.Join(p.shared, "checkpoint") }

// checkpointOf is the dir that holds the sandbox's checkpoint: its own
// (paused before shared checkpoints were configured) or the shared one;
// "" when there is none.
func checkpointOf(p paths) string {
	dirs := []string{p.checkpoint}
	if p.shared != "" {
		dirs = append(dirs, sharedCheckpoint(p))
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "checkpoint.img")); err == nil {
			return d
		}
	}
	return ""
}

// removeLocal removes the sandbox's dirs on this node.
func (b *Backend) removeLocal(p paths) {
	os.RemoveAll(p.state)
	os.RemoveAll(p.run)
}

// Resume implements sandbox.Backend.
func (b *Backend) Resume(ctx context.Context, id string, spec sandbox.Spec) (_ sandbox.Instance, retErr error) {
	p := b.paths(id)
	dir := checkpointOf(p)
	if dir == "" {
		return nil, fmt.Errorf("no checkpoint for %s", id)
	}
	shared := dir != p.checkpoint
	defer func() {
		if retErr != nil {
			b.stopContainer(context.WithoutCancel(ctx), id, p)
			b.detachNetwork(id, p)
			network.RemoveNamespace(p.netns)
			if shared {
				// Still paused, and maybe another node's to resume:
				// nothing of it stays here.
				b.removeLocal(p)
			}
		}
	}()
	// Restored, a sandbox has the normal CPU priority whatever it booted
	// with.
	ln, err := b.prepare(id, p, spec, false)
	if err != nil {
		return nil, err
	}
	if err := b.runscDetached(ctx, id, &spec, "restore", "--detach", "--image-path", dir, "--bundle", p.bundle, "--pid-file", p.pidFile, id); err != nil {
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
	os.RemoveAll(dir)
	if shared {
		os.RemoveAll(p.shared)
	}
	return inst, nil
}
