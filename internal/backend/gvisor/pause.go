package gvisor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/undo"
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
	b.mu.Unlock()
	if inst == nil {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s is not running here", id)
	}
	// The shared dir is made ready first: a refusal there (a planted
	// name, an id that is not one) leaves the sandbox running.
	var shared *os.File
	if p.shared != "" {
		f, err := b.freshShared(id)
		if err != nil {
			return err
		}
		defer f.Close()
		shared = f
	}
	b.mu.Lock()
	delete(b.instances, id)
	delete(b.digests, id)
	b.mu.Unlock()
	err := inst.link.dir.ClearResume()
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, suspendWait)
		err = inst.link.listener().Suspend(sctx)
		cancel()
	}
	inst.link.close()
	if err != nil {
		return fmt.Errorf("suspending agent: %w", err)
	}
	dir := p.checkpoint
	if shared != nil {
		// runsc writes into the directory checked above, whatever its
		// path names by now.
		dir = fdPath(shared)
	} else {
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	if _, err := b.runsc(ctx, id, nil, "checkpoint", "--image-path", dir, id); err != nil {
		return err
	}
	if shared != nil {
		digest, err := digestDir(shared)
		if err != nil {
			return fmt.Errorf("digest of the checkpoint: %w", err)
		}
		b.mu.Lock()
		b.digests[id] = digest
		b.mu.Unlock()
	}
	b.stopContainer(ctx, id, p)
	unmountRoot(p)
	removeCgroups(id)
	b.net.Detach(id, p.state)
	err = network.RemoveNamespace(p.netns)
	if p.shared != "" {
		b.removeLocal(p)
	}
	return err
}

// CheckpointDigest implements sandbox.CheckpointDigester.
func (b *Backend) CheckpointDigest(id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.digests[id]
	delete(b.digests, id)
	return d
}

// checkpointOf opens the dir that holds the sandbox's checkpoint: its own
// (paused before shared checkpoints were configured) or the shared one;
// nil when there is none. shared says which.
func (b *Backend) checkpointOf(id string, p paths) (dir *os.File, shared bool, err error) {
	if _, err := os.Stat(filepath.Join(p.checkpoint, "checkpoint.img")); err == nil || p.shared == "" {
		if err != nil {
			return nil, false, nil
		}
		f, err := os.Open(p.checkpoint)
		return f, false, err
	}
	f, err := b.sharedCheckpointFile(id)
	return f, f != nil, err
}

// removeLocal removes the sandbox's dirs on this node.
func (b *Backend) removeLocal(p paths) {
	os.RemoveAll(p.state)
	os.RemoveAll(p.run)
}

// Resume implements sandbox.Backend.
func (b *Backend) Resume(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	return b.ResumeDigest(ctx, id, spec, "")
}

// ResumeDigest implements sandbox.CheckpointDigester: a shared checkpoint
// is restored only if it has the digest its Pause took ("": not checked),
// and from the very directory that was checked.
func (b *Backend) ResumeDigest(ctx context.Context, id string, spec sandbox.Spec, digest string) (_ sandbox.Instance, retErr error) {
	p := b.paths(id)
	f, shared, err := b.checkpointOf(id, p)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("no checkpoint for %s", id)
	}
	defer f.Close()
	if shared && digest != "" {
		got, err := digestDir(f)
		if err != nil {
			return nil, fmt.Errorf("checking the checkpoint of %s: %w", id, err)
		}
		if got != digest {
			return nil, fmt.Errorf("the checkpoint of %s in the shared dir is not the one its pause saved (digest %s, want %s): refusing to restore it", id, got, digest)
		}
	}
	dir := p.checkpoint
	if shared {
		dir = fdPath(f)
	}
	var u undo.List
	defer u.Run(&retErr)
	u.Add(func() {
		b.stopContainer(context.WithoutCancel(ctx), id, p)
		b.net.Detach(id, p.state)
		network.RemoveNamespace(p.netns)
		if shared {
			// Still paused, and maybe another node's to resume:
			// nothing of it stays here.
			b.removeLocal(p)
		}
	})
	inst, err := b.restore(ctx, id, p, spec, dir, &u)
	if err != nil {
		return nil, err
	}
	if shared {
		if err := b.removeShared(id); err != nil {
			slog.Warn("removing a restored shared checkpoint", "sandbox_id", id, "err", err)
		}
	} else {
		os.RemoveAll(p.checkpoint)
	}
	return inst, nil
}

// restore makes sandbox id's dirs, listener and namespace, restores the
// checkpoint in dir into them and waits for the agent; u gets what undoes
// the listener. Restored, a sandbox has the normal CPU priority whatever
// it booted with.
func (b *Backend) restore(ctx context.Context, id string, p paths, spec sandbox.Spec, dir string, u *undo.List) (*instance, error) {
	ln, err := b.prepare(id, p, spec, false)
	if err != nil {
		return nil, err
	}
	u.Add(ln.close)
	if err := b.runscDetached(ctx, id, &spec, "restore", "--detach", "--image-path", dir, "--bundle", p.bundle, "--pid-file", p.pidFile, id); err != nil {
		return nil, err
	}
	if err := ln.dir.SetResume(); err != nil {
		return nil, err
	}
	return b.connect(ctx, id, p, ln, spec, 30*time.Second)
}
