package gvisor

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3"
)

const (
	cgroupRoot   = "/sys/fs/cgroup"
	cgroupParent = "withruntime"
)

// cgroupLayout is where the host keeps sandboxes' cgroups and how their
// counters read: v1 (one hierarchy per controller, runsc's choice whenever
// /sys/fs/cgroup is not itself cgroup2, hybrid hosts included) or v2 (one
// unified hierarchy). Every sandbox's cgroup is <parent>/<id> in each
// hierarchy.
type cgroupLayout interface {
	// prepare makes the parent of every sandbox's cgroup.
	prepare() error
	// cpuTime is the CPU time of every process in the sandbox's cgroup.
	cpuTime(id string) (time.Duration, error)
	// oomKills is how many times the kernel's OOM killer acted in the
	// sandbox's memory cgroup; false when that cannot be read.
	oomKills(id string) (uint64, bool)
	// remove kills whatever is left in the sandbox's cgroups and removes
	// them. A sandbox with no cgroup is not an error.
	remove(id string) error
	// leftovers lists the ids that have a cgroup under the parent.
	leftovers() []string
	// normalCPU gives the sandbox's cgroup the kernel's default CPU
	// weight, that of every sandbox not booted warm.
	normalCPU(id string) error
	// memoryHeld is the memory the sandbox holds on the host: the
	// sentry's own and its memory file's (anonymous and shared pages),
	// not the host's page cache of its files, which the kernel reclaims.
	memoryHeld(id string) (uint64, error)
	// setMemoryLimit sets the sandbox cgroup's memory limit.
	setMemoryLimit(id string, bytes uint64) error
	// procs lists the processes in the sandbox's memory cgroup.
	procs(id string) ([]int, error)
}

// hostCgroups is the layout of this host, detected the way runsc decides
// where to put a sandbox (the library's mode is unified exactly when
// /sys/fs/cgroup is a cgroup2 mount).
var hostCgroups = sync.OnceValue(func() cgroupLayout {
	switch cgroups.Mode() {
	case cgroups.Unified:
		return newCgroupV2(cgroupRoot, cgroupParent)
	case cgroups.Legacy, cgroups.Hybrid:
		return newCgroupV1(cgroupRoot, cgroupParent)
	}
	return noCgroups{}
})

// prepareCgroups makes the parent cgroup of every sandbox.
func prepareCgroups() error { return hostCgroups().prepare() }

// cgroupPath is the cgroup of sandbox id, relative to each hierarchy: runsc
// takes it as is on v1 and v2 alike.
func cgroupPath(id string) string { return "/" + cgroupParent + "/" + id }

// oomKills is how many times the kernel's OOM killer acted in the
// sandbox's memory cgroup.
func oomKills(id string) (uint64, bool) { return hostCgroups().oomKills(id) }

// removeCgroups removes the sandbox's cgroups in every hierarchy, killing
// what is still in them first. runsc removes them on delete; this catches
// what a crash left.
func removeCgroups(id string) error { return hostCgroups().remove(id) }

// leftoverCgroups lists sandbox ids that have a cgroup under the parent.
func leftoverCgroups() []string { return hostCgroups().leftovers() }

// CPUTime implements sandbox.Meter: the CPU time of every process of the
// sandbox (the sentry, gofer and the stubs that run its programs), from its
// cgroup.
func (b *Backend) CPUTime(id string) (time.Duration, error) { return hostCgroups().cpuTime(id) }

// noCgroups is a host with no cgroup file system: runsc cannot limit a
// sandbox there, and nothing can be read.
type noCgroups struct{}

func (noCgroups) prepare() error                 { return nil }
func (noCgroups) oomKills(string) (uint64, bool) { return 0, false }
func (noCgroups) remove(string) error            { return nil }
func (noCgroups) leftovers() []string            { return nil }
func (noCgroups) normalCPU(string) error         { return nil }
func (noCgroups) memoryHeld(string) (uint64, error) {
	return 0, errors.New("no cgroup file system on this host")
}
func (noCgroups) setMemoryLimit(string, uint64) error {
	return errors.New("no cgroup file system on this host")
}
func (noCgroups) procs(string) ([]int, error) {
	return nil, errors.New("no cgroup file system on this host")
}
func (noCgroups) cpuTime(string) (time.Duration, error) {
	return 0, errors.New("no cgroup file system on this host")
}

// writeCgroupFile writes value into an existing cgroup file: never made
// here, so that a sandbox that is gone gets no cgroup back.
func writeCgroupFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// sumStat adds the values of keys in a cgroup's memory.stat ("key value"
// lines); a key missing from the file is an error.
func sumStat(path string, keys ...string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var sum uint64
	found := 0
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !slices.Contains(keys, k) {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %s: %w", path, k, err)
		}
		sum += n
		found++
	}
	if found != len(keys) {
		return 0, fmt.Errorf("%s: not every one of %v", path, keys)
	}
	return sum, nil
}

// readProcs parses a cgroup.procs file: one pid per line.
func readProcs(path string) ([]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// untilRemoved retries del for as long as settle while killed processes
// are still leaving the cgroup: the kernel refuses to remove a cgroup with
// a process in it.
func untilRemoved(settle time.Duration, del func() error) error {
	deadline := time.Now().Add(settle)
	for {
		err := del()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
