package agent

import (
	"bufio"
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// OOMWatch is the sandbox's OOM killer. gVisor has none: a sandbox whose
// programs outgrow its memory hits the host's cgroup limit, which kills
// the sandbox's kernel and with it every process and file. The watch
// reads the sandbox kernel's /proc/meminfo and, when what is left falls
// under a reserve, kills the process with the largest resident set, as
// Linux's OOM killer would: the program fails, the sandbox lives on. A
// process with oom_score_adj -1000 is spared, as on Linux; memory that
// /tmp and /dev/shm hold is freed by no kill, and past the host's limit
// it still ends the sandbox.
//
// The reserve is memory the programs never get: the host's limit counts
// the sandbox's kernel too (its own heap, about 16 MiB), and a fast
// allocator goes on between two looks.
type OOMWatch struct {
	// Proc is the proc file system to read, "/proc" by default.
	Proc string
	// Self is never killed: the agent (PID 1 of the sandbox).
	Self int
	// Log reports each kill; nil logs nothing.
	Log *slog.Logger
	// kill sends SIGKILL; tests replace it.
	kill func(pid int) error

	// The last kill. The sandbox's kernel takes up to a second to give a
	// killed process's memory back (measured), and the host up to as long
	// again after it shows as available inside: meanwhile the other
	// processes may grow by no more than a quarter of the reserve.
	killedAt     time.Time
	killedAvail  uint64
	killedRSS    uint64
	killedOthers uint64 // the resident sets of the others then
	// dying are the processes killed within settle: not chosen again.
	dying map[int]time.Time
}

const (
	// settle is how long a kill's memory may take to show as freed.
	settle = 2 * time.Second
	// settleSlack is how much less may be available inside while
	// settling before the watch takes it as a new shortage.
	settleSlack = 4 << 20
)

// Reserve is how much of total memory the watch keeps free: 64 MiB for
// the sandbox's kernel and a sixteenth of total for allocations made
// while the watch waits for the CPU (four programs allocating at once in
// a 1 vCPU sandbox took 60 MiB past a 96 MiB reserve before the fourth
// kill), at most 256 MiB of it: how fast programs take memory does not
// grow with its size.
func Reserve(total uint64) uint64 { return 64<<20 + min(total/16, 256<<20) }

// Run watches until the process ends, looking more often the shorter
// memory is.
func (w *OOMWatch) Run() {
	for {
		time.Sleep(w.Check())
	}
}

// Check looks once, kills at most one process, and says when to look
// next.
func (w *OOMWatch) Check() time.Duration {
	total, avail, ok := w.meminfo()
	if !ok {
		return time.Second
	}
	reserve := Reserve(total)
	if w.settling() {
		pid, rss, others := w.scan(reserve / 2)
		// Inside, the others took more than was left at the kill; or, as
		// far as the host may still hold of the killed one, they grew.
		short := avail < reserve && avail+settleSlack < w.killedAvail
		grew := avail < reserve+w.killedRSS && others > w.killedOthers+reserve/4
		if (short || grew) && pid > 0 {
			w.killLargest(pid, rss, others-rss, total, avail)
		}
		return 10 * time.Millisecond
	}
	if avail < reserve {
		if pid, rss, others := w.scan(reserve / 2); pid > 0 {
			w.killLargest(pid, rss, others-rss, total, avail)
		}
		return 10 * time.Millisecond
	}
	return nextLook(avail-reserve, runtime.NumCPU())
}

// allocRate is how fast one CPU can take memory under gVisor: measured
// 1.3 GB/s for a program that fills a new bytearray.
const allocRate = 1536 << 20 // bytes per second

// nextLook is how long the watch may sleep with room bytes above the
// reserve and cpus CPUs allocating as fast as they can: until they could
// have taken that room, between 10 ms and a second. Every look costs the
// sandbox CPU time (about 2 ms of the host's for a wake-up under gVisor),
// so an idle sandbox with room looks a few times a second at most.
func nextLook(room uint64, cpus int) time.Duration {
	d := time.Duration(float64(room) / float64(allocRate*max(cpus, 1)) * float64(time.Second))
	return min(max(d, 10*time.Millisecond), time.Second)
}

// settling reports whether the last kill is recent.
func (w *OOMWatch) settling() bool {
	return !w.killedAt.IsZero() && time.Since(w.killedAt) < settle
}

// killLargest kills pid and remembers what memory looked like then.
func (w *OOMWatch) killLargest(pid int, rss, others, total, avail uint64) {
	w.killPid(pid, rss, total, avail)
	w.killedAt, w.killedAvail, w.killedRSS, w.killedOthers = time.Now(), avail, rss, others
	if w.dying == nil {
		w.dying = map[int]time.Time{}
	}
	w.dying[pid] = w.killedAt
}

func (w *OOMWatch) proc() string {
	if w.Proc == "" {
		return "/proc"
	}
	return w.Proc
}

// meminfo reads MemTotal and MemAvailable in bytes.
func (w *OOMWatch) meminfo() (total, avail uint64, ok bool) {
	m := readMeminfo(w.proc())
	total, haveTotal := m["MemTotal"]
	avail, haveAvail := m["MemAvailable"]
	return total, avail, haveTotal && haveAvail && total > 0
}

// readMeminfo reads proc/meminfo's sizes in bytes, by name (nil when it
// cannot be read).
func readMeminfo(proc string) map[string]uint64 {
	data, err := os.ReadFile(filepath.Join(proc, "meminfo"))
	if err != nil {
		return nil
	}
	m := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, _ := strings.Cut(sc.Text(), ":")
		if v, ok := kiB(rest); ok {
			m[key] = v
		}
	}
	return m
}

// kiB parses " 1234 kB" into bytes.
func kiB(s string) (uint64, bool) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	return n << 10, err == nil
}

// scan finds the process other than Self with the largest resident set,
// if that is at least min (killing a small one frees nothing that counts;
// memory held by /tmp and /dev/shm is freed by no kill), and sums the
// resident sets of all but those dying.
func (w *OOMWatch) scan(min uint64) (pid int, rss, sum uint64) {
	entries, err := os.ReadDir(w.proc())
	if err != nil {
		return 0, 0, 0
	}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == w.Self || p <= 1 || w.isDying(p) {
			continue
		}
		r, ok := w.rss(p)
		if !ok {
			continue
		}
		sum += r
		if r >= min && r > rss && !w.exempt(p) {
			pid, rss = p, r
		}
	}
	return pid, rss, sum
}

// exempt reports whether pid asked never to be killed for memory, as on
// Linux: oom_score_adj -1000.
func (w *OOMWatch) exempt(pid int) bool {
	data, err := os.ReadFile(filepath.Join(w.proc(), strconv.Itoa(pid), "oom_score_adj"))
	return err == nil && strings.TrimSpace(string(data)) == "-1000"
}

// rss is VmRSS of /proc/PID/status in bytes.
func (w *OOMWatch) rss(pid int) (uint64, bool) {
	data, err := os.ReadFile(filepath.Join(w.proc(), strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return kiB(rest)
		}
	}
	return 0, false
}

func (w *OOMWatch) killPid(pid int, rss, total, avail uint64) {
	kill := w.kill
	if kill == nil {
		kill = func(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
	}
	err := kill(pid)
	if w.Log != nil {
		w.Log.Warn("out of memory: killed the largest process", "pid", pid,
			"rss_mib", rss>>20, "total_mib", total>>20, "available_mib", avail>>20, "err", err)
	}
}

// isDying reports whether pid was killed within settle, forgetting
// older kills.
func (w *OOMWatch) isDying(pid int) bool {
	for p, at := range w.dying {
		if time.Since(at) >= settle {
			delete(w.dying, p)
		}
	}
	_, ok := w.dying[pid]
	return ok
}
