package gvisor

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/agentlink"
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/undo"
)

// Start implements sandbox.Backend.
func (b *Backend) Start(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	return b.start(ctx, id, spec, false)
}

// start boots sandbox id; a warm one at the lowest CPU priority.
func (b *Backend) start(ctx context.Context, id string, spec sandbox.Spec, warm bool) (_ sandbox.Instance, retErr error) {
	p := b.paths(id)
	var u undo.List
	defer u.Run(&retErr)
	u.Add(func() { b.Destroy(context.WithoutCancel(ctx), id) })
	ln, err := b.prepare(id, p, spec, warm)
	if err != nil {
		return nil, err
	}
	u.Add(ln.close)
	if err := b.runscDetached(ctx, id, &spec, "run", "--detach", "--bundle", p.bundle, "--pid-file", p.pidFile, id); err != nil {
		return nil, err
	}
	return b.connect(ctx, id, p, ln, spec, 30*time.Second)
}

// prepare makes the sandbox's directories, the agent's listener, the
// network namespace and the spec (a warm one's at the lowest CPU priority).
func (b *Backend) prepare(id string, p paths, spec sandbox.Spec, warm bool) (_ *link, retErr error) {
	for _, d := range []string{p.upper, p.run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	rootfs, err := b.rootfs(p, spec)
	if err != nil {
		return nil, err
	}
	ln, err := listen(p)
	if err != nil {
		return nil, err
	}
	var u undo.List
	defer u.Run(&retErr)
	u.Add(ln.close)
	if err := network.NewNamespace(p.netns); err != nil {
		return nil, fmt.Errorf("making network namespace: %w", err)
	}
	if err := b.attachNetwork(id, p, spec); err != nil {
		return nil, err
	}
	return ln, b.writeSpec(id, p, rootfs, spec, warm)
}

// link is the host's end of a sandbox's agent channel: the directory the
// sandbox sees read-only at sockMountDir, and the listener in it. A
// snapshot suspends the agent, which closes the listener; relisten puts a
// new one in its place while the sandbox runs on, so host is guarded.
type link struct {
	dir *agentlink.Dir

	mu   sync.Mutex
	host *agentlink.Host
}

// listen opens the sandbox's socket directory and listens in it.
func listen(p paths) (*link, error) {
	dir, err := agentlink.OpenDir(p.sock)
	if err != nil {
		return nil, err
	}
	host, err := dir.Listen()
	if err != nil {
		dir.Close()
		return nil, err
	}
	return &link{dir: dir, host: host}, nil
}

func (l *link) close() {
	l.listener().Close()
	l.dir.Close()
}

// listener is the link's listener now.
func (l *link) listener() *agentlink.Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.host
}

// relisten replaces the link's closed listener with a new one.
func (l *link) relisten() error {
	h, err := l.dir.Listen()
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.host
	l.host = h
	l.mu.Unlock()
	old.Close()
	return nil
}

// connect waits until the agent answers on its link, then watches the
// sandbox process and its memory. On success the instance holds ln; on
// failure ln is the caller's to close (its undo list does).
func (b *Backend) connect(ctx context.Context, id string, p paths, ln *link, spec sandbox.Spec, limit time.Duration) (*instance, error) {
	inst := &instance{id: id, link: ln, done: make(chan struct{})}
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := ln.listener().Ready(rctx); err != nil {
		return nil, err
	}
	pid, err := readPid(p.pidFile)
	if err != nil {
		return nil, err
	}
	// One pidfd for the process, opened once: a pid freed meanwhile could
	// name another process.
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, err
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if n, ok := oomKills(id); ok {
		inst.oomKills.Store(n)
	}
	inst.watch(fd)
	inst.limitMemory(dup, spec)
	b.mu.Lock()
	old := b.instances[id]
	b.instances[id] = inst
	b.mu.Unlock()
	if old != nil {
		old.link.close()
	}
	return inst, nil
}

func readPid(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading sandbox pid: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// instance is a live gVisor sandbox.
type instance struct {
	id   string
	link *link
	done chan struct{}

	reason  sandbox.EndReason // set before done is closed
	message string
	// overMemory is set when the host ended the sandbox for holding more
	// than its size; oomKills is the cgroup's count of the kernel's OOM
	// kills at the memory watcher's last look.
	overMemory atomic.Bool
	oomKills   atomic.Uint64
}

var _ sandbox.Instance = (*instance)(nil)

// DialAgent hands out a connection the agent opened to this sandbox's own
// listener; nothing is dialed by name.
func (i *instance) DialAgent(ctx context.Context) (net.Conn, error) {
	return i.link.listener().Dial(ctx)
}

func (i *instance) Done() <-chan struct{} { return i.done }

func (i *instance) Cause() (sandbox.EndReason, string) { return i.reason, i.message }
