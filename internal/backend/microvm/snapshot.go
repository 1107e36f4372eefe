package microvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/agentlink"
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/undo"
)

var _ sandbox.Snapshotter = (*Backend)(nil)

// A snapshot's directory holds the machine (QEMU's migration stream, as a
// pause writes it) and the sandbox's disk as it was at the same instant.
const (
	snapMachine = "machine"
	snapDisk    = "disk.img"
)

// relinkWait bounds the wait for the source's agent after a snapshot.
const relinkWait = 30 * time.Second

// Snapshot implements sandbox.Snapshotter: a pause that leaves the
// machine running. The agent lets go of its host connections, QEMU stops
// the guest, the host copies the sandbox's disk and then takes the
// machine through the pause's bounded pipe, and QEMU goes on; the agent
// takes the port's next session. The guest runs nothing between the disk
// copy and the machine's save, so the two are of one instant.
func (b *Backend) Snapshot(ctx context.Context, id, dir string) error {
	i, err := b.running(id)
	if err != nil {
		return err
	}
	p := b.paths(id)
	// As for a pause, a QEMU that stops answering its monitor or keeps
	// migrating is ended when the time is up (the disk's copy counts in).
	ctx, cancel := context.WithTimeout(ctx, pauseTimeout(i.memMiB)+time.Duration(b.diskMiB(p)/64)*time.Second)
	defer cancel()
	stopWatchdog := context.AfterFunc(ctx, i.kill)
	defer stopWatchdog()
	err = b.save(ctx, i, p, dir)
	// Whatever happened, the guest runs and the agent is linked again.
	if cerr := i.qmp.run("cont", nil, nil); cerr != nil {
		return errors.Join(err, fmt.Errorf("letting the machine go on: %w", cerr))
	}
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), relinkWait)
	defer lcancel()
	if lerr := i.link(lctx, p); lerr != nil {
		return errors.Join(err, fmt.Errorf("the agent did not come back after the snapshot: %w", lerr))
	}
	return err
}

// save writes the disk and the machine of i into dir; it leaves the guest
// stopped.
func (b *Backend) save(ctx context.Context, i *instance, p paths, dir string) error {
	if err := i.agent().Suspend(ctx); err != nil {
		return fmt.Errorf("suspending the agent: %w", err)
	}
	machine, err := os.OpenFile(filepath.Join(dir, snapMachine), os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer machine.Close()
	// QEMU's stop drains and flushes the disk: what the copy reads is all
	// the guest wrote.
	if err := i.qmp.run("stop", nil, nil); err != nil {
		return err
	}
	if err := copyDisk(filepath.Join(dir, snapDisk), p.disk); err != nil {
		return fmt.Errorf("copying the disk: %w", err)
	}
	if err := saveMachine(ctx, i, machine); err != nil {
		return err
	}
	return machine.Sync()
}

// diskMiB is the size of the sandbox's disk file.
func (b *Backend) diskMiB(p paths) int64 {
	fi, err := os.Lstat(p.disk)
	if err != nil {
		return 0
	}
	return fi.Size() >> 20
}

// StartSnapshot implements sandbox.Snapshotter: a resume of the saved
// machine under a new id, on a copy of the snapshot's disk, with its own
// network, jail, cgroup and QEMU user. The agent then gives the guest its
// own identity: randomness, boot id, and the new link's address (Linux
// keeps the one it booted with). The snapshot stays as it is.
func (b *Backend) StartSnapshot(ctx context.Context, id string, spec sandbox.Spec, dir string) (_ sandbox.Instance, retErr error) {
	machine, err := os.OpenFile(filepath.Join(dir, snapMachine), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindNotFound, err, "no saved machine")
	}
	defer machine.Close()
	p := b.paths(id)
	var u undo.List
	defer u.Run(&retErr)
	u.Add(func() { b.Destroy(context.WithoutCancel(ctx), id) })
	if err := os.MkdirAll(p.run, 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(p.state, 0o700); err != nil {
		return nil, err
	}
	if err := copyDisk(p.disk, filepath.Join(dir, snapDisk)); err != nil {
		return nil, fmt.Errorf("copying the snapshot's disk: %w", err)
	}
	tap, link, err := b.attachNetwork(id, p, spec)
	if err != nil {
		return nil, err
	}
	if tap != nil {
		defer tap.Close()
	}
	// The guest read its config disk at its boot, long ago; QEMU needs one
	// of the same size, and this one is the new sandbox's own.
	if err := b.writeConfig(p.config, spec, link); err != nil {
		return nil, err
	}
	inst, err := b.boot(ctx, id, p, spec, tap, loadMachine(ctx, machine), false)
	if err != nil {
		return nil, err
	}
	nw, err := b.reseedNet(link)
	if err != nil {
		return nil, err
	}
	ans, err := agentlink.Reseed(ctx, inst.DialAgent, nw)
	if err != nil {
		return nil, err
	}
	if !ans.KernelReseeded {
		// The guest's Linux is its own: its generator must not be its
		// siblings'.
		return nil, fmt.Errorf("reseeding the sandbox: the guest's kernel did not take the host's entropy")
	}
	return inst, nil
}

// reseedNet is what the guest's agent sets for link (nil: no network).
func (b *Backend) reseedNet(link *network.Link) (*agentlink.ReseedNet, error) {
	if link == nil {
		return nil, nil
	}
	files, _, err := b.guestTrust(link)
	if err != nil {
		return nil, err
	}
	return &agentlink.ReseedNet{Addr: link.SandboxAddr.String(), Prefix: link.Prefix.Bits(), Gw: link.HostAddr.String(), Resolver: files["/etc/resolv.conf"]}, nil
}

// copyDisk copies the disk file src (a path of the host's: the guest
// writes the file's bytes, never its name) into dst, a new file, hole
// for hole. The kernel copies each extent (copy_file_range), which file
// systems that can share blocks (XFS, Btrfs) do by reference.
func copyDisk(dst, src string) (retErr error) {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a plain file", src)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err := out.Close(); retErr == nil {
			retErr = err
		}
		if retErr != nil {
			os.Remove(dst)
		}
	}()
	size := fi.Size()
	if err := out.Truncate(size); err != nil {
		return err
	}
	inFd, outFd := int(in.Fd()), int(out.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(inFd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // holes to the end
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(inFd, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		for pos := data; pos < hole; {
			in, out := pos, pos
			n, err := unix.CopyFileRange(inFd, &in, outFd, &out, int(min(hole-pos, 1<<30)), 0)
			if err != nil {
				return err
			}
			if n == 0 {
				return io.ErrUnexpectedEOF
			}
			pos += int64(n)
		}
		off = hole
	}
	return out.Sync()
}
