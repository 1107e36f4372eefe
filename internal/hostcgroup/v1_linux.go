package hostcgroup

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// V1 is the v1 layout: one hierarchy per controller under root
// (root/cpuacct, root/memory, root/cpuset, ...), each holding
// <parent>/<id>. CPU time is cpuacct.usage, an OOM kill is oom_kill in
// memory.oom_control.
type V1 struct {
	root, parent string
	// settle is how long remove waits for killed processes to leave.
	settle time.Duration
	// mounted is the library's subsystems that have a hierarchy under root.
	mounted func() ([]cgroup1.Subsystem, error)
}

func newV1(root, parent string) V1 {
	return V1{
		root: root, parent: parent, settle: 5 * time.Second,
		mounted: sync.OnceValues(func() ([]cgroup1.Subsystem, error) { return v1Subsystems(root), nil }),
	}
}

// v1Pather is what every subsystem of the library has: the directory of a
// cgroup in its hierarchy.
type v1Pather interface{ Path(string) string }

// v1Subsystems are the library's subsystems whose hierarchy is mounted
// under root (the library's own default list is found through /proc/self/mountinfo,
// and a test needs another root). Memory leaves out the swap and kernel
// counters: only oom_control is read, and kernels without those files
// would fail the whole read.
func v1Subsystems(root string) []cgroup1.Subsystem {
	all := []cgroup1.Subsystem{
		cgroup1.NewNamed(root, "systemd"),
		cgroup1.NewFreezer(root),
		cgroup1.NewPids(root),
		cgroup1.NewNetCls(root),
		cgroup1.NewNetPrio(root),
		cgroup1.NewPerfEvent(root),
		cgroup1.NewCpuset(root),
		cgroup1.NewCpu(root),
		cgroup1.NewCpuacct(root),
		cgroup1.NewMemory(root, cgroup1.IgnoreModules("memsw", "kmem", "kmem.tcp")),
		cgroup1.NewBlkio(root),
		cgroup1.NewRdma(root),
		cgroup1.NewDevices(root),
	}
	if h, err := cgroup1.NewHugetlb(root); err == nil {
		all = append(all, h)
	}
	var mounted []cgroup1.Subsystem
	for _, s := range all {
		if _, err := os.Stat(s.(v1Pather).Path("/")); err == nil {
			mounted = append(mounted, s)
		}
	}
	return mounted
}

func (c V1) group(id string) string { return filepath.Join("/", c.parent, id) }

// hierarchy is the mounted subsystems, or only those named.
func (c V1) hierarchy(only ...cgroup1.Name) cgroup1.Hierarchy {
	return func() ([]cgroup1.Subsystem, error) {
		all, err := c.mounted()
		if err != nil || len(only) == 0 {
			return all, err
		}
		var some []cgroup1.Subsystem
		for _, s := range all {
			if slices.Contains(only, s.Name()) {
				some = append(some, s)
			}
		}
		return some, nil
	}
}

func (c V1) load(id string, only ...cgroup1.Name) (cgroup1.Cgroup, error) {
	return cgroup1.Load(cgroup1.StaticPath(c.group(id)), cgroup1.WithHierarchy(c.hierarchy(only...)))
}

// Prepare gives the parent cpuset cgroup CPUs and memory nodes: a new one
// starts with none, and runsc cannot give its child any until the parent
// has them. The library copies the root's. runsc makes the rest.
func (c V1) Prepare() error {
	_, err := cgroup1.New(cgroup1.StaticPath("/"+c.parent), &specs.LinuxResources{}, cgroup1.WithHierarchy(c.hierarchy(cgroup1.Cpuset)))
	if err != nil {
		return fmt.Errorf("making cpuset cgroup: %w", err)
	}
	return nil
}

func (c V1) CPUTime(id string) (time.Duration, error) {
	cg, err := c.load(id, cgroup1.Cpuacct)
	if err != nil {
		return 0, fmt.Errorf("loading CPU cgroup of %s: %w", id, err)
	}
	m, err := cg.Stat()
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of %s: %w", id, err)
	}
	return time.Duration(m.CPU.Usage.Total), nil
}

func (c V1) OOMKills(id string) (uint64, bool) {
	cg, err := c.load(id, cgroup1.Memory)
	if err != nil {
		return 0, false
	}
	m, err := cg.Stat()
	if err != nil || m.MemoryOomControl == nil {
		return 0, false
	}
	return m.MemoryOomControl.OomKill, true
}

func (c V1) Remove(id string) error {
	cg, err := c.load(id)
	if errors.Is(err, cgroup1.ErrCgroupDeleted) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading cgroups of %s: %w", id, err)
	}
	// Killed again on every try, without the freezer: the library waits
	// without bound for every task to freeze, and one in uninterruptible
	// sleep never does. Nothing here forks for the guest (the sentry makes
	// its own stubs, QEMU makes none, and both are dead by now), so the
	// list runs dry.
	killAndDelete := func() error {
		for _, s := range cg.Subsystems() {
			procs, _ := cg.Processes(s.Name(), true)
			for _, p := range procs {
				unix.Kill(p.Pid, unix.SIGKILL)
			}
		}
		return cg.Delete()
	}
	if err := untilRemoved(c.settle, killAndDelete); err != nil {
		return fmt.Errorf("removing cgroups of %s: %w", id, err)
	}
	return nil
}

func (c V1) Leftovers() []string {
	seen := map[string]bool{}
	subs, _ := c.mounted()
	for _, s := range subs {
		entries, _ := os.ReadDir(s.(v1Pather).Path("/" + c.parent))
		for _, e := range entries {
			if e.IsDir() {
				seen[e.Name()] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// NormalCPU writes the default cpu.shares, 1024, in the cpu hierarchy.
func (c V1) NormalCPU(id string) error {
	dir, ok := c.dirIn(cgroup1.Cpu, id)
	if !ok {
		return nil // no cpu hierarchy: no share was set either
	}
	if err := writeCgroupFile(filepath.Join(dir, "cpu.shares"), strconv.Itoa(v1DefaultShares)); err != nil {
		return fmt.Errorf("setting CPU shares of %s: %w", id, err)
	}
	return nil
}

// dirIn is the sandbox's cgroup in the hierarchy of subsystem name, if
// that hierarchy is mounted.
func (c V1) dirIn(name cgroup1.Name, id string) (string, bool) {
	subs, _ := c.mounted()
	for _, s := range subs {
		if s.Name() == name {
			return s.(v1Pather).Path(c.group(id)), true
		}
	}
	return "", false
}

// memoryDir is the sandbox's cgroup in the memory hierarchy.
func (c V1) memoryDir(id string) (string, error) {
	if dir, ok := c.dirIn(cgroup1.Memory, id); ok {
		return dir, nil
	}
	return "", errors.New("no memory cgroup hierarchy on this host")
}

// MemoryHeld is rss (anonymous memory: the sentry's, a VM's RAM) and
// shmem (a memory file) of memory.stat; v1's cache also counts the page
// cache.
func (c V1) MemoryHeld(id string) (uint64, error) {
	dir, err := c.memoryDir(id)
	if err != nil {
		return 0, err
	}
	return sumStat(filepath.Join(dir, "memory.stat"), "rss", "shmem")
}

func (c V1) SetMemoryLimit(id string, bytes uint64) error {
	dir, err := c.memoryDir(id)
	if err != nil {
		return err
	}
	return writeCgroupFile(filepath.Join(dir, "memory.limit_in_bytes"), strconv.FormatUint(bytes, 10))
}

func (c V1) Procs(id string) ([]int, error) {
	dir, err := c.memoryDir(id)
	if err != nil {
		return nil, err
	}
	return readProcs(filepath.Join(dir, "cgroup.procs"))
}
