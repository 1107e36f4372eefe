package gvisor

import (
	"time"

	"github.com/withruntime/withruntime/internal/hostcgroup"
)

// cgroupParent is the cgroup every gVisor sandbox's is in, in each
// hierarchy.
const cgroupParent = "withruntime"

// hostCgroups is the layout of this host for gVisor sandboxes: the one
// runsc writes them in.
func hostCgroups() hostcgroup.Layout { return hostcgroup.Host(cgroupParent) }

// prepareCgroups makes the parent cgroup of every sandbox.
func prepareCgroups() error { return hostCgroups().Prepare() }

// cgroupPath is the cgroup of sandbox id, relative to each hierarchy: runsc
// takes it as is on v1 and v2 alike.
func cgroupPath(id string) string { return hostCgroups().Path(id) }

// oomKills is how many times the kernel's OOM killer acted in the
// sandbox's memory cgroup.
func oomKills(id string) (uint64, bool) { return hostCgroups().OOMKills(id) }

// removeCgroups removes the sandbox's cgroups in every hierarchy, killing
// what is still in them first. runsc removes them on delete; this catches
// what a crash left.
func removeCgroups(id string) error { return hostCgroups().Remove(id) }

// leftoverCgroups lists sandbox ids that have a cgroup under the parent.
func leftoverCgroups() []string { return hostCgroups().Leftovers() }

// CPUTime implements sandbox.Meter: the CPU time of every process of the
// sandbox (the sentry, gofer and the stubs that run its programs), from its
// cgroup.
func (b *Backend) CPUTime(id string) (time.Duration, error) { return hostCgroups().CPUTime(id) }
