package agent

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// orphanReaper lets the serving process itself be the sandbox's PID 1,
// saving a second start of the agent on every sandbox boot. Orphans
// re-parented to PID 1 are reaped; a child that os/exec started and will
// wait for is never taken from it.
type orphanReaper struct {
	mu  sync.Mutex // held while a child starts and while reaping; guards own
	own map[int]bool
}

// start starts c and records it as a child os/exec waits for. A nil reaper
// only starts it.
func (r *orphanReaper) start(c *exec.Cmd) error {
	if r == nil {
		return c.Start()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := c.Start(); err != nil {
		return err
	}
	r.own[c.Process.Pid] = true
	return nil
}

// waited forgets a child once os/exec has reaped it.
func (r *orphanReaper) waited(pid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	delete(r.own, pid)
	r.mu.Unlock()
}

// run reaps on every SIGCHLD, and every few seconds in case one was
// coalesced away.
func (r *orphanReaper) run() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGCHLD)
	tick := time.NewTicker(5 * time.Second)
	for {
		select {
		case <-sigs:
		case <-tick.C:
		}
		r.reap()
	}
}

// reap collects every zombie child that os/exec does not own.
func (r *orphanReaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Most SIGCHLDs are for a command whose waiter has reaped it already:
	// a look at the first waitable child (left waitable) saves reading
	// every process's stat on each of them. Only a child that is waited
	// for elsewhere, which may hide others behind it, needs the scan.
	for {
		pid, ok := waitable()
		if !ok {
			return
		}
		if r.own[pid] {
			break
		}
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
	self := os.Getpid()
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || r.own[pid] {
			continue
		}
		if state, ppid, ok := statePpid(pid); ok && state == 'Z' && ppid == self {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// waitable returns a zombie child, leaving it to be waited for, or false
// when there is none.
func waitable() (int, bool) {
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
		return 0, false
	}
	pid := siginfoPid(&info)
	return pid, pid > 0
}

// siginfoPid is si_pid: the union of siginfo_t starts after three ints,
// aligned to a pointer.
func siginfoPid(info *unix.Siginfo) int {
	off := (3*unsafe.Sizeof(int32(0)) + unsafe.Sizeof(uintptr(0)) - 1) &^ (unsafe.Sizeof(uintptr(0)) - 1)
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}

// statePpid reads a process's state and parent from /proc/PID/stat.
func statePpid(pid int) (byte, int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, 0, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return f[0][0], ppid, err == nil
}

// ReapOrphans makes the server reap the orphans re-parented to it: call it
// when the agent serves as PID 1 itself.
func (s *Server) ReapOrphans() {
	if s.reaper != nil {
		return
	}
	s.reaper = &orphanReaper{own: map[int]bool{}}
	go s.reaper.run()
}
