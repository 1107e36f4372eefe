package microvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/agentlink"
	"github.com/withruntime/withruntime/internal/hostcgroup"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/undo"
)

// bootTimeout bounds a boot: seconds under KVM, many more under TCG.
func (b *Backend) bootTimeout() time.Duration {
	if b.cfg.Accel == "tcg" {
		return 90 * time.Second
	}
	return 30 * time.Second
}

// qemuOverheadMiB is what QEMU holds beside the guest's memory: its own
// heap and, under TCG, the translation cache (capped by tb-size).
const qemuOverheadMiB = 192

// qemuThreads bounds QEMU's threads (vCPUs, I/O workers).
const qemuThreads = 256

// Start implements sandbox.Backend.
func (b *Backend) Start(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	return b.start(ctx, id, spec, false)
}

// start boots a new sandbox; warm, at the lowest CPU priority (a pool
// member).
func (b *Backend) start(ctx context.Context, id string, spec sandbox.Spec, warm bool) (_ sandbox.Instance, retErr error) {
	p := b.paths(id)
	if err := os.MkdirAll(p.run, 0o700); err != nil {
		return nil, err
	}
	if err := b.makeDisk(ctx, p, spec); err != nil {
		return nil, err
	}
	tap, link, err := b.attachNetwork(id, p, spec)
	if err != nil {
		return nil, err
	}
	if tap != nil {
		defer tap.Close()
	}
	// After the tap's close is deferred: the network is detached first.
	var u undo.List
	defer u.Run(&retErr)
	u.Add(func() { b.detachNetwork(id, p) })
	if err := b.writeConfig(p.config, spec, link); err != nil {
		return nil, err
	}
	inst, err := b.boot(ctx, id, p, spec, tap, nil, warm)
	if err != nil {
		return nil, err
	}
	return inst, nil
}

// makeDisk makes the sandbox's state dir, its empty writable disk of the
// disk size, and its config disk. The host formats the disk and never
// mounts it: after that, only the guest reads it.
func (b *Backend) makeDisk(ctx context.Context, p paths, spec sandbox.Spec) error {
	if err := os.MkdirAll(p.state, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(p.disk, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(spec.DiskMiB) << 20)
	f.Close()
	if err != nil {
		return err
	}
	mk := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", p.disk)
	if out, err := mk.CombinedOutput(); err != nil {
		return fmt.Errorf("formatting the disk: %v: %s", err, out)
	}
	return nil
}

// boot starts QEMU and waits for the agent. With restore set, QEMU
// takes the machine from it (a resume) instead of booting.
func (b *Backend) boot(ctx context.Context, id string, p paths, spec sandbox.Spec, tap *os.File, restore func(*qmp) error, warm bool) (_ sandbox.Instance, retErr error) {
	// A template's disk is made on its first microVM, before the boot's
	// own time starts.
	base, err := b.baseFor(ctx, spec)
	if err != nil {
		return nil, err
	}
	timeout := b.bootTimeout()
	if warm {
		// At the lowest CPU priority a busy host gives a boot what is
		// left, which under TCG may be little.
		timeout *= 4
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := os.MkdirAll(p.run, 0o700); err != nil {
		return nil, err
	}
	r := hostcgroup.Resources{
		MemoryBytes: int64(spec.MemoryMiB+qemuOverheadMiB) << 20,
		CPUQuota:    int64(spec.VCPUs) * 100000, CPUPeriod: 100000,
		Pids: qemuThreads,
	}
	if warm {
		r.Shares = hostcgroup.WarmShares
	}
	// A boot that failed holds nothing: no QEMU, no mount, no cgroup.
	var u undo.List
	defer u.Run(&retErr)
	err = b.cg.Create(id, r)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	u.Add(func() { b.cg.Remove(id) })
	// A launch that fails may have mounted the jail and the volumes'
	// views already (its virtiofsd went with the cgroup).
	u.Add(func() { releaseJail(p); releaseVolumes(p) })
	qemuOut := &ring{max: 16 << 10}
	cmd, err := b.launch(id, p, base, spec, restore != nil, tap, qemuOut)
	if err != nil {
		return nil, err
	}
	i := newInstance(id, cmd.Process.Pid, b.cg, spec.MemoryMiB)
	go i.reap(cmd)
	u.Add(func() {
		i.kill()
		<-i.done
		if msg := consoleTail(i); msg != "" {
			retErr = fmt.Errorf("%w (console: %s)", retErr, msg)
		}
		if msg := lastLine(qemuOut.String()); msg != "" {
			retErr = fmt.Errorf("%w (qemu: %s)", retErr, msg)
		}
	})
	if err := b.cg.Add(id, cmd.Process.Pid); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	if err := i.connect(ctx, p); err != nil {
		return nil, err
	}
	if restore != nil {
		if err := restore(i.qmp); err != nil {
			return nil, err
		}
	}
	if err := i.qmp.run("cont", nil, nil); err != nil {
		return nil, err
	}
	if err := i.link(ctx, p); err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.instances[id] = i
	b.mu.Unlock()
	return i, nil
}

// Attach implements sandbox.Backend: it finds the QEMU an earlier server
// started by its pid file and checks that the process is that sandbox's.
func (b *Backend) Attach(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	ctx, cancel := context.WithTimeout(ctx, b.bootTimeout())
	defer cancel()
	p := b.paths(id)
	data, err := os.ReadFile(p.pidFile)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindNotFound, err, "no QEMU on record")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !isQEMUOf(p, pid, id) {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s's QEMU is gone", id)
	}
	i := newInstance(id, pid, b.cg, spec.MemoryMiB)
	if err := i.watchPid(); err != nil {
		return nil, err
	}
	if err := b.adoptNetwork(id, p); err != nil {
		return nil, err
	}
	if err := i.connect(ctx, p); err != nil {
		i.close()
		return nil, err
	}
	if err := i.link(ctx, p); err != nil {
		i.close()
		return nil, err
	}
	b.mu.Lock()
	b.instances[id] = i
	b.mu.Unlock()
	return i, nil
}

// isQEMUOf reports whether pid is QEMU started for sandbox id: its user
// is the one on record for the sandbox and its command line names it.
func isQEMUOf(p paths, pid int, id string) bool {
	uid, err := recordedUID(p, id)
	if err != nil {
		return false
	}
	if got, ok := procUID(strconv.Itoa(pid)); !ok || got != uid {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(cmdline), "\x00wr-"+id+"\x00")
}

// instance is a running QEMU.
type instance struct {
	id     string
	pid    int
	cg     hostcgroup.Layout
	memMiB int // the guest's memory: what bounds its checkpoint
	done   chan struct{}

	qmp *qmp
	con *ring

	hostMu sync.Mutex // guards host: a snapshot links the agent anew
	host   *agentlink.Host

	mu       sync.Mutex // guards stopping
	stopping bool       // the host is ending it: not a crash

	reason  sandbox.EndReason // set before done is closed
	message string
}

var _ sandbox.Instance = (*instance)(nil)

func newInstance(id string, pid int, cg hostcgroup.Layout, memMiB int) *instance {
	return &instance{id: id, pid: pid, cg: cg, memMiB: memMiB, done: make(chan struct{}), con: &ring{max: 16 << 10}}
}

func (i *instance) DialAgent(ctx context.Context) (net.Conn, error) { return i.agent().Dial(ctx) }
func (i *instance) Done() <-chan struct{}                           { return i.done }
func (i *instance) Cause() (sandbox.EndReason, string)              { return i.reason, i.message }

// connect opens QEMU's monitor and drains its console.
func (i *instance) connect(ctx context.Context, p paths) error {
	q, err := dialQMP(ctx, filepath.Join(p.vm, "qmp.sock"), i.pid)
	if err != nil {
		return err
	}
	i.qmp = q
	go func() {
		<-i.done
		q.Close()
	}()
	con, err := dialJailSocket(ctx, filepath.Join(p.vm, "console.sock"), i.pid)
	if err != nil {
		return err
	}
	go func() {
		io.Copy(i.con, con)
		con.Close()
	}()
	go func() {
		<-i.done
		con.Close()
	}()
	return nil
}

// link connects to the agent's port and waits until the agent answers.
func (i *instance) link(ctx context.Context, p paths) error {
	c, err := dialJailSocket(ctx, filepath.Join(p.vm, "agent.sock"), i.pid)
	if err != nil {
		return err
	}
	h, err := agentlink.ServePort(ctx, c)
	if err != nil {
		return err
	}
	i.hostMu.Lock()
	i.host = h
	i.hostMu.Unlock()
	go func() {
		<-i.done
		h.Close()
	}()
	if err := h.Ready(ctx); err != nil {
		return fmt.Errorf("waiting for the agent: %w", err)
	}
	return nil
}

// agent is the host's end of the current link to the agent.
func (i *instance) agent() *agentlink.Host {
	i.hostMu.Lock()
	defer i.hostMu.Unlock()
	return i.host
}

// reap waits for a QEMU this process started.
func (i *instance) reap(cmd *exec.Cmd) {
	err := cmd.Wait()
	i.exited(err)
}

// watchPid waits for a QEMU an earlier server started, through a pidfd.
func (i *instance) watchPid() error {
	fd, err := unix.PidfdOpen(i.pid, 0)
	if err != nil {
		return sandbox.Wrap(sandbox.KindNotFound, err, "sandbox's QEMU is gone")
	}
	go func() {
		defer unix.Close(fd)
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
				break
			}
		}
		i.exited(nil)
	}()
	return nil
}

// exited records why QEMU ended: the host ended it (stop, pause), the
// kernel's OOM killer did (out_of_memory), or the guest crashed,
// panicked or powered off, or QEMU died (error).
func (i *instance) exited(err error) {
	i.mu.Lock()
	stopping := i.stopping
	i.mu.Unlock()
	i.reason, i.message = sandbox.EndStopped, ""
	if !stopping {
		i.reason = sandbox.EndError
		switch {
		case i.oomKilled():
			// QEMU is alone in its cgroup: whatever the kernel killed there
			// was QEMU.
			i.reason, i.message = sandbox.EndOutOfMemory, "the microVM's QEMU outgrew its memory"
		case guestOOM(i.con.String()):
			// The guest ended itself for memory: its kernel found nothing
			// left to kill, or its memory file systems hold it all.
			i.reason, i.message = sandbox.EndOutOfMemory, "the guest ran out of memory"
		case err != nil:
			i.message = "QEMU ended: " + err.Error()
		default:
			i.message = "the guest ended"
		}
		if tail := consoleTail(i); tail != "" {
			i.message += ": " + tail
		}
	}
	close(i.done)
}

// oomKilled reports whether the kernel's OOM killer acted in the
// sandbox's cgroup, which holds QEMU alone.
func (i *instance) oomKilled() bool {
	n, ok := i.cg.OOMKills(i.id)
	return ok && n > 0
}

// kill ends QEMU (the host's doing, not a crash).
func (i *instance) kill() {
	i.mu.Lock()
	i.stopping = true
	i.mu.Unlock()
	unix.Kill(i.pid, unix.SIGKILL)
}

// close drops the host's connections without ending QEMU (a server that
// gives up on attaching leaves the sandbox to the sweep).
func (i *instance) close() {
	if i.qmp != nil {
		i.qmp.Close()
	}
	if h := i.agent(); h != nil {
		h.Close()
	}
}

// guestOOM reports whether the guest's kernel panicked for want of
// memory. Root in the guest can print such a line itself, and so lie
// only about its own sandbox's end.
func guestOOM(console string) bool {
	if strings.Contains(console, agentlink.OOMMark) {
		return true // the agent's MemFSWatch
	}
	return strings.Contains(console, "Kernel panic") &&
		(strings.Contains(console, "Out of memory and no killable processes") || strings.Contains(console, "System is deadlocked on memory"))
}

// consoleTail is the last lines of the guest's console that say why it
// ended (a panic), bounded.
func consoleTail(i *instance) string {
	lines := strings.Split(strings.TrimSpace(i.con.String()), "\n")
	for j := len(lines) - 1; j >= 0; j-- {
		if l := strings.TrimSpace(lines[j]); strings.Contains(l, "Kernel panic") || strings.Contains(l, "microvm-init:") {
			return clip(l)
		}
	}
	return ""
}

// lastLine is the last line of s that says something, clipped.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return clip(strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:]))
}

// clip bounds a line quoted in an end message; what it quotes came from
// the guest or QEMU, so it is also made printable.
func clip(l string) string {
	if len(l) > 300 {
		l = l[:300]
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' && r != '\t' {
			return -1
		}
		return r
	}, strings.ToValidUTF8(l, ""))
}

// ring keeps the last max bytes written to it.
type ring struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - r.max; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	return len(p), nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.buf)
}
