package gvisor

import (
	"log/slog"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// A sandbox's memory has two limits on the host.
//
// The soft one is its size: runsc boots the sandbox's kernel with the
// cgroup's limit at the size, so that free and /proc/meminfo show it,
// and the agent's OOM watch kills the largest program before the
// programs reach it. What the sandbox holds on the host past its size
// for longer than overGrace (memory of /tmp and /dev/shm, which no kill
// frees) ends it, as out of memory.
//
// The hard one is the cgroup's limit once the agent answers: the size and
// a headroom for what the programs take between two looks of the watch.
// Without it the watch raced the host: a program filling memory at
// 1.3 GB/s outran a look delayed by a busy host, and the kernel's OOM
// killer ended the whole sandbox for one program (four allocating
// processes did in one run of ten on a quiet 2-core host).
const (
	// headroomPerCPU is the hard limit's headroom per vCPU: about 90 ms
	// of one CPU filling memory under gVisor.
	headroomPerCPU = 128 << 20
	// overGrace is how long the sandbox may hold more than its size: a
	// killed program's memory takes up to 2 s to leave the host
	// (measured), and the hard limit bounds the excess meanwhile.
	overGrace = 4 * time.Second
	// overLook is how often the host reads what a sandbox holds and marks
	// its new stubs (oomorder.go).
	overLook = 250 * time.Millisecond
)

// hardLimit is the cgroup's memory limit of a running sandbox of spec:
// its size and a headroom of headroomPerCPU per vCPU, at most half the
// size.
func hardLimit(spec sandbox.Spec) uint64 {
	size := uint64(spec.MemoryMiB) << 20
	return size + min(uint64(max(spec.VCPUs, 1))*headroomPerCPU, size/2)
}

// overWatch tells when a sandbox has held more than its size for too
// long, fed one reading at a time. Time over the size fills a bucket and
// time under it drains the bucket at half that rate, so a sandbox over
// its size without a break ends after the grace, and one that dips under
// it now and then to keep the headroom (root inside can spare a process
// from the agent's watch) ends too unless it spends twice as long under.
type overWatch struct {
	size  uint64
	grace time.Duration
	level time.Duration // what the bucket holds
	last  time.Time     // the previous reading
}

// over takes what the sandbox held at now and reports whether the bucket
// has reached the grace.
func (w *overWatch) over(held uint64, now time.Time) bool {
	var dt time.Duration
	if !w.last.IsZero() {
		dt = now.Sub(w.last)
	}
	w.last = now
	if held > w.size {
		w.level += dt
	} else {
		w.level = max(w.level-dt/2, 0)
	}
	return w.level >= w.grace
}

// limitMemory raises the cgroup's limit of the running sandbox to its
// hard limit, marks its stubs for the host's OOM killer and watches what
// it holds against its size until it ends.
// A host whose cgroups cannot be read or written keeps the limit runsc
// set, the size.
// It takes fd over, a pidfd of the sandbox process.
func (i *instance) limitMemory(fd int, spec sandbox.Spec) {
	size := uint64(spec.MemoryMiB) << 20
	cg := hostCgroups()
	if size == 0 {
		unix.Close(fd)
		return
	}
	if err := cg.SetMemoryLimit(i.id, hardLimit(spec)); err != nil {
		slog.Warn("raising a sandbox's memory limit by its headroom", "sandbox_id", i.id, "err", err)
		unix.Close(fd)
		return
	}
	go func() {
		defer unix.Close(fd)
		w := overWatch{size: size, grace: overGrace}
		order := oomOrder{group: cgroupPath(i.id)}
		if pids, err := cg.Procs(i.id); err == nil {
			order.update(pids)
		}
		t := time.NewTicker(overLook)
		defer t.Stop()
		for {
			select {
			case <-i.done:
				return
			case now := <-t.C:
				if n, ok := cg.OOMKills(i.id); ok {
					i.oomKills.Store(n)
				}
				if pids, err := cg.Procs(i.id); err == nil {
					order.update(pids)
				}
				held, err := cg.MemoryHeld(i.id)
				if err != nil || !w.over(held, now) {
					continue
				}
				i.overMemory.Store(true)
				slog.Warn("a sandbox held more memory than its size: ending it", "sandbox_id", i.id,
					"held_mib", held>>20, "size_mib", size>>20)
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				return
			}
		}
	}()
}
