package gvisor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The host's OOM killer acts when the agent's watch is late: on a busy
// host a program that fills memory fast reaches the hard limit first. In
// the sandbox's cgroup it then kills the process with the largest resident
// set. Those are the sandbox's two host processes (the sentry, its kernel,
// and the gofer, started by runsc) and a stub per program's address space
// (systrap's), whose resident set is that program's memory. Killing a stub
// ends that program alone, as Linux's OOM killer would; killing the sentry
// ends the sandbox with every file and process. The sentry's resident set
// can outgrow a program's (it maps what it copies and what /tmp holds), so
// every stub is marked to go first. A stub inherits the sentry's mark when
// the sentry makes it, so the mark is given to each new stub as the host
// sees it.

// stubOOMScoreAdj is a stub's oom_score_adj: half the limit's worth of
// points over the sentry's, so a stub is taken first unless the sentry
// holds half the limit more than it. On the whole host too a program of
// a sandbox goes before any host process.
const stubOOMScoreAdj = 500

// oomOrder marks the stubs of a sandbox's cgroup, once each.
type oomOrder struct {
	proc  string       // the proc file system, "/proc" by default
	group string       // the sandbox's cgroup path, as /proc/PID/cgroup shows it
	seen  map[int]bool // the processes already looked at
}

// update looks at the cgroup's processes: one whose parent is in the
// cgroup too is a stub (runsc's processes have parents outside it) and,
// new, gets stubOOMScoreAdj. A pid is only a name: each process is held
// by its /proc directory while it is looked at, and marked only if that
// process is in the sandbox's cgroup, so a pid freed and taken by a host
// process between the listing and the write is never marked.
func (o *oomOrder) update(pids []int) {
	in := make(map[int]bool, len(pids))
	for _, p := range pids {
		in[p] = true
	}
	seen := make(map[int]bool, len(pids))
	for _, p := range pids {
		seen[p] = true
		if !o.seen[p] {
			o.mark(p, in)
		}
	}
	o.seen = seen
}

// mark gives pid stubOOMScoreAdj if it is a stub of the cgroup.
func (o *oomOrder) mark(pid int, in map[int]bool) {
	dir, err := os.Open(fmt.Sprintf("%s/%d", o.procDir(), pid))
	if err != nil {
		return // gone
	}
	defer dir.Close()
	if !o.inGroup(dir) {
		return
	}
	if ppid, err := parent(dir); err == nil && in[ppid] {
		writeAt(dir, "oom_score_adj", strconv.Itoa(stubOOMScoreAdj))
	}
}

func (o *oomOrder) procDir() string {
	if o.proc == "" {
		return "/proc"
	}
	return o.proc
}

// inGroup reports whether the process of dir is in the sandbox's cgroup:
// a line of its cgroup file ("ID:CONTROLLERS:PATH") names it.
func (o *oomOrder) inGroup(dir *os.File) bool {
	data, err := readAt(dir, "cgroup")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) == 3 && parts[2] == o.group {
			return true
		}
	}
	return false
}

// parent reads the parent pid of the process of dir.
func parent(dir *os.File) (int, error) {
	data, err := readAt(dir, "stat")
	if err != nil {
		return 0, err
	}
	f, err := statAfterName(data)
	if err != nil {
		return 0, err
	}
	if len(f) < 2 {
		return 0, errors.New("malformed stat")
	}
	return strconv.Atoi(f[1])
}

// statFields are the fields of PROC/PID/stat after the command name: the
// state first, then the parent pid.
func statFields(proc string, pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", proc, pid))
	if err != nil {
		return nil, err
	}
	return statAfterName(data)
}

// statAfterName splits a stat file after the command name, which is in
// parentheses and may hold anything, parentheses and spaces included.
func statAfterName(data []byte) ([]string, error) {
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("malformed stat")
	}
	return strings.Fields(s[i+1:]), nil
}

// readAt reads the file name of the directory dir.
func readAt(dir *os.File, name string) ([]byte, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

// writeAt writes value into the existing file name of the directory dir.
func writeAt(dir *os.File, name, value string) error {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
