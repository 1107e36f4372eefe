package hostcgroup

import (
	"fmt"
	"path/filepath"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Create makes the sandbox's cgroup in the memory, cpu, cpuacct (which
// CPUTime reads) and pids hierarchies, and cpuset when r names CPUs. A
// hierarchy missing from the host is an error: a limit must never be
// dropped in silence.
func (c V1) Create(id string, r Resources) error {
	need := []cgroup1.Name{cgroup1.Memory, cgroup1.Cpu, cgroup1.Cpuacct, cgroup1.Pids}
	if r.Cpus != "" {
		need = append(need, cgroup1.Cpuset)
	}
	for _, name := range need {
		if _, ok := c.dirIn(name, id); !ok {
			return fmt.Errorf("making cgroups of %s: no %s cgroup hierarchy on this host", id, name)
		}
	}
	if _, err := cgroup1.New(cgroup1.StaticPath(c.group(id)), r.spec(), cgroup1.WithHierarchy(c.hierarchy(need...))); err != nil {
		c.Remove(id)
		return fmt.Errorf("making cgroups of %s: %w", id, err)
	}
	return nil
}

// spec is r as the OCI spec has it, which the v1 library takes and the
// v2 library converts: a nil part sets nothing.
func (r Resources) spec() *specs.LinuxResources {
	res := &specs.LinuxResources{}
	if r.MemoryBytes > 0 {
		res.Memory = &specs.LinuxMemory{Limit: &r.MemoryBytes}
	}
	if r.CPUQuota > 0 || r.Cpus != "" {
		res.CPU = &specs.LinuxCPU{Cpus: r.Cpus}
		if r.CPUQuota > 0 {
			period := r.period()
			res.CPU.Quota, res.CPU.Period = &r.CPUQuota, &period
		}
	}
	if r.Pids > 0 {
		res.Pids = &specs.LinuxPids{Limit: r.Pids}
	}
	if r.Shares > 0 {
		if res.CPU == nil {
			res.CPU = &specs.LinuxCPU{}
		}
		res.CPU.Shares = &r.Shares
	}
	return res
}

// Add writes pid into cgroup.procs of every hierarchy the sandbox has a
// cgroup in.
func (c V1) Add(id string, pid int) error {
	cg, err := c.load(id)
	if err != nil {
		return fmt.Errorf("loading cgroups of %s: %w", id, err)
	}
	if err := cg.Add(cgroup1.Process{Pid: pid}); err != nil {
		return fmt.Errorf("adding %d to the cgroups of %s: %w", pid, id, err)
	}
	return nil
}

// Path is "/<parent>/<id>".
func (c V1) Path(id string) string { return "/" + c.parent + "/" + id }

// File is the path of file name of the sandbox's cgroup in the hierarchy
// of controller ("memory", "cpu", ...).
func (c V1) File(id, controller, name string) (string, error) {
	dir, ok := c.dirIn(cgroup1.Name(controller), id)
	if !ok {
		return "", fmt.Errorf("no %s cgroup hierarchy on this host", controller)
	}
	return filepath.Join(dir, name), nil
}

// Create makes the sandbox's cgroup with limits r. Prepare has enabled
// cpu, memory and pids for it; the library enables cpuset in its
// ancestors when r names CPUs.
func (c V2) Create(id string, r Resources) error {
	if _, err := cgroup2.NewManager(c.mount, c.group(id), cgroup2.ToResources(r.spec())); err != nil {
		return fmt.Errorf("making cgroup of %s: %w", id, err)
	}
	return nil
}

// Add writes pid into the sandbox cgroup's cgroup.procs.
func (c V2) Add(id string, pid int) error {
	m, err := c.load(id)
	if err != nil {
		return fmt.Errorf("loading cgroup of %s: %w", id, err)
	}
	if err := m.AddProc(uint64(pid)); err != nil {
		return fmt.Errorf("adding %d to the cgroup of %s: %w", pid, id, err)
	}
	return nil
}

// Path is "/<parent>/<id>".
func (c V2) Path(id string) string { return "/" + c.parent + "/" + id }

// File is the path of file name of the sandbox's cgroup; every controller
// shares the one directory.
func (c V2) File(id, _, name string) (string, error) {
	return filepath.Join(c.mount, c.group(id), name), nil
}
