package gvisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/undo"
)

// Destroy implements sandbox.Backend.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	p := b.paths(id)
	b.mu.Lock()
	inst := b.instances[id]
	delete(b.instances, id)
	b.mu.Unlock()
	if inst != nil {
		inst.link.close()
	}
	var errs []error
	b.stopContainer(ctx, id, p)
	if err := b.net.Detach(id, p.state); err != nil {
		errs = append(errs, err)
	}
	if err := network.RemoveNamespace(p.netns); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(id); err != nil {
		errs = append(errs, err)
	}
	unmountRoot(p)
	if err := os.RemoveAll(p.run); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(p.state); err != nil {
		errs = append(errs, err)
	}
	if p.shared != "" && validID(id) {
		// Never through a name planted there: a symlink is refused and
		// left (the error says so), whatever it points to.
		if err := b.removeShared(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopContainer kills and deletes the runsc container. The sandbox
// process is killed first: `runsc delete --force` on a live sandbox waits
// for a graceful stop that takes seconds, on a dead one it takes
// milliseconds, and nothing inside deserves a graceful stop.
func (b *Backend) stopContainer(ctx context.Context, id string, p paths) {
	if pid, err := readPid(p.pidFile); err == nil && alive(pid) {
		unix.Kill(pid, unix.SIGKILL)
		for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond)
		}
	}
	b.runsc(ctx, id, nil, "delete", "--force", id)
}

// Sweep implements sandbox.Backend.
func (b *Backend) Sweep(ctx context.Context, keep func(id string) bool) error {
	seen := map[string]bool{}
	for _, dir := range []string{b.cfg.RunDir, filepath.Join(b.cfg.DataDir, "sandboxes")} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() && e.Name() != "runsc" {
				seen[e.Name()] = true
			}
		}
	}
	for _, id := range leftoverCgroups() {
		// Only this data dir's sandboxes: another server on the host may
		// own the rest.
		if _, err := os.Stat(filepath.Join(b.cfg.DataDir, "sandboxes", id)); err == nil {
			seen[id] = true
		}
	}
	var errs []error
	kept := 0
	for id := range seen {
		if keep(id) {
			kept++
			continue
		}
		if err := b.Destroy(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	if b.plumb != nil {
		keepIf := map[string]bool{}
		for id := range seen {
			if keep(id) {
				if l, err := network.ReadLink(b.paths(id).state); err == nil {
					keepIf[l.HostIf] = true
				}
			}
		}
		if err := b.plumb.Sweep(func(hostIf string) bool { return keepIf[hostIf] }); err != nil {
			errs = append(errs, err)
		}
	}
	if kept == 0 {
		// runsc shares one empty network namespace between the gofers of
		// a state root; with no sandbox left it is a leftover too.
		for unix.Unmount(filepath.Join(b.runscRoot(), "null-netns"), unix.MNT_DETACH) == nil {
		}
	}
	return errors.Join(errs...)
}

// Attach implements sandbox.Backend.
func (b *Backend) Attach(ctx context.Context, id string, spec sandbox.Spec) (_ sandbox.Instance, retErr error) {
	p := b.paths(id)
	pid, err := readPid(p.pidFile)
	if err != nil || !alive(pid) {
		return nil, errors.New("sandbox process is gone")
	}
	if err := b.net.Adopt(id, p.state); err != nil {
		return nil, err
	}
	// The agent lost its connections with the last server and dials again
	// until this listener answers.
	ln, err := listen(p)
	if err != nil {
		return nil, err
	}
	var u undo.List
	defer u.Run(&retErr)
	u.Add(ln.close)
	return b.connect(ctx, id, p, ln, spec, 10*time.Second)
}

// Close removes what the backend keeps on the host for its data dir when
// no sandbox of it is live: the packet rules (left behind they would keep
// two host ports closed) and runsc's state root with its shared empty
// namespace. With live sandboxes both stay, so that a restarted server
// finds its sandboxes still steered and known to runsc.
func (b *Backend) Close() error {
	b.mu.Lock()
	live := b.net.Len() + len(b.instances)
	b.mu.Unlock()
	if live > 0 {
		return nil
	}
	var errs []error
	if b.plumb != nil {
		errs = append(errs, b.plumb.Uninstall())
	}
	for unix.Unmount(filepath.Join(b.runscRoot(), "null-netns"), unix.MNT_DETACH) == nil {
	}
	if entries, _ := os.ReadDir(b.cfg.RunDir); len(entries) <= 1 {
		errs = append(errs, os.RemoveAll(b.cfg.RunDir))
	}
	return errors.Join(errs...)
}
