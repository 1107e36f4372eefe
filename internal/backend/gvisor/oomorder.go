package gvisor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
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
	proc string       // the proc file system, "/proc" by default
	seen map[int]bool // the processes already looked at
}

// update looks at the cgroup's processes: one whose parent is in the
// cgroup too is a stub (runsc's processes have parents outside it) and,
// new, gets stubOOMScoreAdj.
func (o *oomOrder) update(pids []int) {
	in := make(map[int]bool, len(pids))
	for _, p := range pids {
		in[p] = true
	}
	seen := make(map[int]bool, len(pids))
	for _, p := range pids {
		seen[p] = true
		if o.seen[p] {
			continue
		}
		if ppid, err := o.parent(p); err == nil && in[ppid] {
			o.writeAdj(p, stubOOMScoreAdj)
		}
	}
	o.seen = seen
}

func (o *oomOrder) procDir() string {
	if o.proc == "" {
		return "/proc"
	}
	return o.proc
}

// parent reads the parent pid of /proc/PID/stat.
func (o *oomOrder) parent(pid int) (int, error) {
	f, err := statFields(o.procDir(), pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 2 {
		return 0, fmt.Errorf("pid %d: malformed stat", pid)
	}
	return strconv.Atoi(f[1])
}

// writeAdj writes an existing process's oom_score_adj: a process gone is
// nothing to mark.
func (o *oomOrder) writeAdj(pid, adj int) error {
	return writeCgroupFile(fmt.Sprintf("%s/%d/oom_score_adj", o.procDir(), pid), strconv.Itoa(adj))
}

// statFields are the fields of PROC/PID/stat after the command name,
// which is in parentheses and may hold anything: the state first, then
// the parent pid.
func statFields(proc string, pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", proc, pid))
	if err != nil {
		return nil, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("pid %d: malformed stat", pid)
	}
	return strings.Fields(s[i+1:]), nil
}
