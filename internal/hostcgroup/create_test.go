package hostcgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/cgroups/v3"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestCreateAddRemoveOnThisHost makes a sandbox's cgroups as a backend
// that starts its own process does (QEMU), against the kernel's v1
// hierarchies: the limits are in the kernel's files, the process is in
// every hierarchy's cgroup.procs, and Remove kills it and removes them.
func TestCreateAddRemoveOnThisHost(t *testing.T) {
	testenv.RequiresRoot(t)
	if m := cgroups.Mode(); m != cgroups.Legacy && m != cgroups.Hybrid {
		t.Skip("no cgroup v1 hierarchies on this host")
	}
	c := newV1(Root, testParent()+"-vm")
	t.Cleanup(func() {
		for _, id := range []string{"vm", "bare"} {
			c.Remove(id)
		}
		for _, s := range v1Subsystems(Root) {
			os.Remove(s.(v1Pather).Path("/" + c.parent))
		}
	})
	if err := c.Prepare(); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	r := Resources{MemoryBytes: 96 << 20, CPUQuota: 50000, CPUPeriod: 100000, Cpus: "0", Pids: 32, Shares: WarmShares}
	if err := c.Create("vm", r); err != nil {
		t.Fatalf("Create: %v", err)
	}
	p := hold(t, "exec sleep 60")
	if err := c.Add("vm", p.pid()); err != nil {
		t.Fatalf("Add: %v", err)
	}
	p.release(t)

	for _, tc := range []struct{ controller, file, want string }{
		{"memory", "memory.limit_in_bytes", strconv.Itoa(96 << 20)},
		{"cpu", "cpu.cfs_quota_us", "50000"},
		{"cpu", "cpu.cfs_period_us", "100000"},
		{"cpuset", "cpuset.cpus", "0"},
		{"pids", "pids.max", "32"},
		{"cpu", "cpu.shares", "2"},
	} {
		if got := readFile(t, c, "vm", tc.controller, tc.file); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.file, got, tc.want)
		}
	}
	// A claimed pool member gets the kernel's default priority.
	if err := c.NormalCPU("vm"); err != nil {
		t.Fatal(err)
	}
	if got, _, normal, err := CPUPriority(c, "vm"); err != nil || got != normal {
		t.Errorf("after NormalCPU: got priority %q %v, want %q", got, err, normal)
	}
	for _, controller := range []string{"memory", "cpu", "cpuacct", "pids", "cpuset"} {
		procs := strings.Fields(readFile(t, c, "vm", controller, "cgroup.procs"))
		if !slices.Contains(procs, strconv.Itoa(p.pid())) {
			t.Errorf("%s: got cgroup.procs %v, want pid %d in it", controller, procs, p.pid())
		}
	}
	// The kernel places the process where runsc's spec would name it.
	own, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid()), "cgroup"))
	if want := ":memory:" + c.Path("vm") + "\n"; !strings.Contains(string(own), want) {
		t.Errorf("/proc/%d/cgroup: got %q, want a line ending %q", p.pid(), own, want)
	}
	if pids, err := c.Procs("vm"); err != nil || !slices.Equal(pids, []int{p.pid()}) {
		t.Errorf("Procs: got %v, %v; want [%d]", pids, err, p.pid())
	}
	if _, err := c.CPUTime("vm"); err != nil {
		t.Errorf("CPUTime: %v", err)
	}

	// No limits: no cpuset cgroup, the counters' hierarchies all the same.
	if err := c.Create("bare", Resources{}); err != nil {
		t.Fatalf("Create without limits: %v", err)
	}
	if dir, _ := c.dirIn("cpuset", "bare"); exists(dir) {
		t.Errorf("Create without CPUs made a cpuset cgroup %s", dir)
	}
	if dir, _ := c.dirIn("cpuacct", "bare"); !exists(dir) {
		t.Errorf("Create without limits made no cpuacct cgroup %s", dir)
	}
	if got, want := c.Leftovers(), []string{"bare", "vm"}; !slices.Equal(got, want) {
		t.Fatalf("Leftovers: got %v, want %v", got, want)
	}

	removeV1(t, c, p, "vm", "bare")
	if err := c.Remove("vm"); err != nil {
		t.Fatalf("removing a cgroup that is gone: %v", err)
	}
	if err := c.Add("vm", os.Getpid()); err == nil {
		t.Fatal("Add to a removed cgroup: got no error, want one")
	}
}

// TestCreateNeedsEveryHierarchy: on a v1 host without a hierarchy a
// limit needs, Create fails and makes nothing, rather than start a
// process without the limit.
func TestCreateNeedsEveryHierarchy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mounted []string
		r       Resources
		fails   bool
	}{
		{"all there", []string{"memory", "cpu", "cpuacct", "pids", "cpuset"}, Resources{Cpus: "0"}, false},
		{"no pids", []string{"memory", "cpu", "cpuacct"}, Resources{}, true},
		{"no cpuset for CPUs", []string{"memory", "cpu", "cpuacct", "pids"}, Resources{Cpus: "0"}, true},
		{"no cpuset, no CPUs named", []string{"memory", "cpu", "cpuacct", "pids"}, Resources{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, h := range tc.mounted {
				os.MkdirAll(filepath.Join(root, h, "p"), 0o755)
			}
			// A cpuset cgroup takes its CPUs and memory nodes from its parent.
			os.WriteFile(filepath.Join(root, "cpuset", "p", "cpuset.cpus"), []byte("0-1\n"), 0o644)
			os.WriteFile(filepath.Join(root, "cpuset", "p", "cpuset.mems"), []byte("0\n"), 0o644)
			c := newV1(root, "p")
			err := c.Create("vm", tc.r)
			if tc.fails {
				if err == nil {
					t.Fatal("got no error, want one")
				}
				for _, h := range tc.mounted {
					if dir := filepath.Join(root, h, "p", "vm"); exists(dir) {
						t.Errorf("a failed Create left %s", dir)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range []string{"memory", "cpu", "cpuacct", "pids"} {
				if dir := filepath.Join(root, h, "p", "vm"); !exists(dir) {
					t.Errorf("got no %s", dir)
				}
			}
		})
	}
}

// TestCgroupV2Create runs Create and Add over a tree laid out as the
// kernel shows v2: the limits are in the unified cgroup's files and the
// pid in its cgroup.procs.
func TestCgroupV2Create(t *testing.T) {
	c := fakeV2(t, nil)
	r := Resources{MemoryBytes: 96 << 20, CPUQuota: 150000, Cpus: "0-1", Pids: 32}
	if err := c.Create("vm", r); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := c.Add("vm", 4242); err != nil {
		t.Fatalf("Add: %v", err)
	}
	for _, tc := range []struct{ file, want string }{
		{"memory.max", strconv.Itoa(96 << 20)},
		{"cpu.max", "150000 100000"},
		{"cpuset.cpus", "0-1"},
		{"pids.max", "32"},
		{"cgroup.procs", "4242"},
	} {
		if got := readFile(t, c, "vm", "", tc.file); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.file, got, tc.want)
		}
	}
	if got, want := c.Path("vm"), "/withruntime/vm"; got != want {
		t.Errorf("Path: got %q, want %q", got, want)
	}
}

// readFile reads a file of id's cgroup in the hierarchy of controller.
func readFile(t *testing.T, l interface {
	File(id, controller, name string) (string, error)
}, id, controller, name string) string {
	t.Helper()
	path, err := l.File(id, controller, name)
	data, rerr := os.ReadFile(path)
	if err = errors.Join(err, rerr); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return path != "" && err == nil
}
