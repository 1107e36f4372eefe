package microvm

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/network"
)

// recordedPid is the QEMU pid an earlier server wrote, if that process
// is still this sandbox's QEMU.
func (b *Backend) recordedPid(p paths, id string) (int, bool) {
	data, err := os.ReadFile(p.pidFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !isQEMUOf(p, pid, id) {
		return 0, false
	}
	return pid, true
}

// killPid kills pid through a pidfd (no recycled pid is hit) and waits
// for it to go.
func killPid(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	unix.Poll(fds, 10000)
}

// Destroy implements sandbox.Backend: QEMU is killed, its jail unmounted,
// its cgroup and every file removed. It is idempotent.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	b.mu.Lock()
	i := b.instances[id]
	delete(b.instances, id)
	b.mu.Unlock()
	p := b.paths(id)
	if i != nil {
		i.kill()
		select {
		case <-i.done:
		case <-time.After(10 * time.Second):
		}
	} else if pid, ok := b.recordedPid(p, id); ok {
		// A QEMU of an earlier server that nobody attached.
		killPid(pid)
	}
	// Whatever is left in the cgroup (a QEMU nobody knew of) goes with it.
	if err := b.cg.Remove(id); err != nil {
		return err
	}
	releaseJail(p)
	if err := releaseVolumes(p); err != nil {
		return err
	}
	if err := b.detachNetwork(id, p); err != nil {
		return err
	}
	if err := os.RemoveAll(p.run); err != nil {
		return err
	}
	return os.RemoveAll(p.state)
}

// Sweep implements sandbox.Backend.
func (b *Backend) Sweep(ctx context.Context, keep func(id string) bool) error {
	seen := map[string]bool{}
	for _, dir := range []string{b.cfg.RunDir, b.stateRoot()} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				seen[e.Name()] = true
			}
		}
	}
	for _, id := range b.cg.Leftovers() {
		// Only this data dir's sandboxes: another server on the host may
		// own the rest.
		if _, err := os.Stat(b.paths(id).state); err == nil {
			seen[id] = true
		}
	}
	var errs []error
	keepIf := map[string]bool{}
	for id := range seen {
		if keep(id) {
			if l, err := network.ReadLink(b.paths(id).state); err == nil {
				keepIf[l.HostIf] = true
			}
			continue
		}
		if err := b.Destroy(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	if b.plumb != nil {
		if err := b.plumb.Sweep(func(hostIf string) bool { return keepIf[hostIf] }); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
