package hostcgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"
)

// V2 is the v2 layout: one unified hierarchy at mount, each
// sandbox's cgroup at mount/<parent>/<id>, where runsc puts it when
// /sys/fs/cgroup is cgroup2. CPU time is usage_usec in cpu.stat, an OOM
// kill is oom_kill in memory.events, the processes are in cgroup.procs,
// and a cgroup goes with an rmdir once they are gone.
type V2 struct {
	mount, parent string
	// settle is how long remove waits for killed processes to leave.
	settle time.Duration
}

func newV2(mount, parent string) V2 {
	return V2{mount: mount, parent: parent, settle: 5 * time.Second}
}

// v2Controllers are those every sandbox's cgroup must have: the counters
// read here and the limits runsc sets. Without cpu in a cgroup's
// cgroup.controllers the library reads no cpu.stat.
var v2Controllers = []string{"cpu", "memory", "pids"}

func (c V2) group(id string) string { return filepath.Join("/", c.parent, id) }

func (c V2) load(id string) (*cgroup2.Manager, error) {
	return cgroup2.Load(c.group(id), cgroup2.WithMountpoint(c.mount))
}

// Prepare makes the parent and enables the controllers for its children.
// The parent is made here and not by runsc: runsc removes on delete every
// cgroup it made, and would try the shared parent too.
func (c V2) Prepare() error {
	parent, err := cgroup2.NewManager(c.mount, "/"+c.parent, &cgroup2.Resources{})
	if err != nil {
		return fmt.Errorf("making cgroup %s: %w", c.parent, err)
	}
	have, err := parent.RootControllers()
	if err != nil {
		return fmt.Errorf("reading the host's cgroup controllers: %w", err)
	}
	var want []string
	for _, ctrl := range v2Controllers {
		if slices.Contains(have, ctrl) {
			want = append(want, ctrl)
		}
	}
	if len(want) == 0 {
		return nil
	}
	// The library writes the cgroup.subtree_control of a group's
	// ancestors: those of a (never made) child are the root's and the
	// parent's, which is what gives every sandbox's cgroup the controllers.
	child, err := c.load("sandbox")
	if err != nil {
		return err
	}
	if err := child.ToggleControllers(want, cgroup2.Enable); err != nil {
		return fmt.Errorf("enabling cgroup controllers: %w", err)
	}
	return nil
}

func (c V2) CPUTime(id string) (time.Duration, error) {
	m, err := c.load(id)
	if err != nil {
		return 0, fmt.Errorf("loading cgroup of %s: %w", id, err)
	}
	ctrls, err := m.Controllers()
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of %s: %w", id, err)
	}
	if !slices.Contains(ctrls, "cpu") {
		// The library would answer zero: a sandbox billed nothing.
		return 0, fmt.Errorf("reading CPU time of %s: the cpu controller is not enabled in its cgroup", id)
	}
	st, err := m.Stat()
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of %s: %w", id, err)
	}
	return time.Duration(st.CPU.UsageUsec) * time.Microsecond, nil
}

func (c V2) OOMKills(id string) (uint64, bool) {
	m, err := c.load(id)
	if err != nil {
		return 0, false
	}
	st, err := m.Stat()
	if err != nil || st.MemoryEvents == nil {
		return 0, false
	}
	return st.MemoryEvents.OomKill, true
}

func (c V2) Remove(id string) error {
	dir := filepath.Join(c.mount, c.group(id))
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	m, err := c.load(id)
	if err != nil {
		return fmt.Errorf("loading cgroup of %s: %w", id, err)
	}
	killAndDelete := func() error {
		c.kill(m, dir)
		return m.Delete()
	}
	if err := untilRemoved(c.settle, killAndDelete); err != nil {
		return fmt.Errorf("removing cgroup of %s: %w", id, err)
	}
	return nil
}

// kill kills every process in the cgroup; Delete then refuses the cgroup
// as long as one is left. cgroup.kill (Linux 5.14) kills them all at once.
// Without it the library would freeze the cgroup first and wait without
// bound for the freeze, so the processes listed are killed one by one.
func (c V2) kill(m *cgroup2.Manager, dir string) {
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err == nil {
		m.Kill()
		return
	}
	pids, _ := m.Procs(true)
	for _, pid := range pids {
		unix.Kill(int(pid), unix.SIGKILL)
	}
}

func (c V2) Leftovers() []string {
	entries, _ := os.ReadDir(filepath.Join(c.mount, c.parent))
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// NormalCPU writes the default cpu.weight, 100 (runsc turned the warm
// start's shares into a weight of 1).
func (c V2) NormalCPU(id string) error {
	path := filepath.Join(c.mount, c.group(id), "cpu.weight")
	if err := writeCgroupFile(path, strconv.Itoa(v2DefaultWeight)); err != nil {
		return fmt.Errorf("setting CPU weight of %s: %w", id, err)
	}
	return nil
}

// MemoryHeld is anon (anonymous memory: the sentry's, a VM's RAM) and
// shmem (a memory file) of memory.stat; file, the page cache, is left
// out.
func (c V2) MemoryHeld(id string) (uint64, error) {
	return sumStat(filepath.Join(c.mount, c.group(id), "memory.stat"), "anon", "shmem")
}

func (c V2) SetMemoryLimit(id string, bytes uint64) error {
	return writeCgroupFile(filepath.Join(c.mount, c.group(id), "memory.max"), strconv.FormatUint(bytes, 10))
}

func (c V2) Procs(id string) ([]int, error) {
	return readProcs(filepath.Join(c.mount, c.group(id), "cgroup.procs"))
}
