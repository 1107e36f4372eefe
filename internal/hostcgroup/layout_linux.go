package hostcgroup

import (
	"errors"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3"
)

// Root is where the host mounts its cgroup file systems.
const Root = "/sys/fs/cgroup"

// Layout is where the host keeps sandboxes' cgroups and how their
// counters read: v1 (one hierarchy per controller, runsc's choice whenever
// /sys/fs/cgroup is not itself cgroup2, hybrid hosts included) or v2 (one
// unified hierarchy). Every sandbox's cgroup is <parent>/<id> in each
// hierarchy.
type Layout interface {
	// Prepare makes the parent of every sandbox's cgroup.
	Prepare() error
	// CPUTime is the CPU time of every process in the sandbox's cgroup.
	CPUTime(id string) (time.Duration, error)
	// OOMKills is how many times the kernel's OOM killer acted in the
	// sandbox's memory cgroup; false when that cannot be read.
	OOMKills(id string) (uint64, bool)
	// Remove kills whatever is left in the sandbox's cgroups and removes
	// them. A sandbox with no cgroup is not an error.
	Remove(id string) error
	// Leftovers lists the ids that have a cgroup under the parent.
	Leftovers() []string
	// NormalCPU gives the sandbox's cgroup the kernel's default CPU
	// weight, that of every sandbox not booted warm.
	NormalCPU(id string) error
	// MemoryHeld is the memory the sandbox holds on the host: its
	// processes' anonymous and shared pages, not the host's page cache of
	// its files, which the kernel reclaims.
	MemoryHeld(id string) (uint64, error)
	// SetMemoryLimit sets the sandbox cgroup's memory limit.
	SetMemoryLimit(id string, bytes uint64) error
	// Procs lists the processes in the sandbox's memory cgroup.
	Procs(id string) ([]int, error)
	// Create makes the sandbox's cgroup, with limits r, in every
	// hierarchy they need and those the counters read: for processes a
	// backend starts itself, where no runsc makes the cgroup.
	Create(id string, r Resources) error
	// Add moves process pid into the sandbox's cgroups: every hierarchy
	// it has a cgroup in on v1, the unified one on v2.
	Add(id string, pid int) error
	// Path is the sandbox's cgroup relative to each hierarchy,
	// "/<parent>/<id>": runsc takes it as is on v1 and v2 alike.
	Path(id string) string
}

// Resources are the limits Create gives a sandbox's cgroup.
type Resources struct {
	// MemoryBytes is the memory limit; 0 is none.
	MemoryBytes int64
	// CPUQuota is the CPU time in microseconds the cgroup may use per
	// CPUPeriod (100 ms when 0); 0 is no quota.
	CPUQuota  int64
	CPUPeriod uint64
	// Cpus is the cpuset the processes may run on ("0-1"); "" is all of
	// the parent's.
	Cpus string
	// Pids is the most processes the cgroup may hold; 0 is no limit.
	Pids int64
	// Shares is the CPU priority in cpu.shares (WarmShares for a pool
	// member); 0 is the kernel's default.
	Shares uint64
}

// defaultCPUPeriod is the kernel's CFS period, in microseconds.
const defaultCPUPeriod = 100000

// period is the CPU period r means.
func (r Resources) period() uint64 {
	if r.CPUPeriod == 0 {
		return defaultCPUPeriod
	}
	return r.CPUPeriod
}

// The kernel's CPU priority of a new cgroup: what a sandbox that did not
// boot warm has.
const (
	v1DefaultShares = 1024
	v2DefaultWeight = 100
)

var (
	_ Layout = V1{}
	_ Layout = V2{}
	_ Layout = noCgroups{}
)

// hosts caches each parent's layout.
var hosts sync.Map // parent -> func() Layout

// Host is the layout of this host for sandboxes under parent, detected
// the way runsc decides where to put a sandbox (the library's mode is
// unified exactly when /sys/fs/cgroup is a cgroup2 mount), once per
// parent.
func Host(parent string) Layout {
	once, ok := hosts.Load(parent)
	if !ok {
		once, _ = hosts.LoadOrStore(parent, sync.OnceValue(func() Layout { return detect(parent) }))
	}
	return once.(func() Layout)()
}

func detect(parent string) Layout {
	switch cgroups.Mode() {
	case cgroups.Unified:
		return newV2(Root, parent)
	case cgroups.Legacy, cgroups.Hybrid:
		return newV1(Root, parent)
	}
	return noCgroups{parent: parent}
}

// errNoCgroups is every answer of a host without cgroups that has to be
// an error.
var errNoCgroups = errors.New("no cgroup file system on this host")

// noCgroups is a host with no cgroup file system: nothing can limit a
// sandbox there, and nothing can be read.
type noCgroups struct{ parent string }

func (noCgroups) Prepare() error                        { return nil }
func (noCgroups) OOMKills(string) (uint64, bool)        { return 0, false }
func (noCgroups) Remove(string) error                   { return nil }
func (noCgroups) Leftovers() []string                   { return nil }
func (noCgroups) NormalCPU(string) error                { return nil }
func (noCgroups) MemoryHeld(string) (uint64, error)     { return 0, errNoCgroups }
func (noCgroups) SetMemoryLimit(string, uint64) error   { return errNoCgroups }
func (noCgroups) Procs(string) ([]int, error)           { return nil, errNoCgroups }
func (noCgroups) CPUTime(string) (time.Duration, error) { return 0, errNoCgroups }
func (noCgroups) Create(string, Resources) error        { return errNoCgroups }
func (noCgroups) Add(string, int) error                 { return errNoCgroups }
func (n noCgroups) Path(id string) string               { return "/" + n.parent + "/" + id }
