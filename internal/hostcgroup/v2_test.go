package hostcgroup

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Most users' hosts are pure cgroup v2 (Debian 12 and 13, Ubuntu 22.04 and
// later), but no pure-v2 host can be booted here: this machine's
// /sys/fs/cgroup is v1, its cgroup2 mount (/sys/fs/cgroup/unified) can
// have no cpu or memory controller because a controller lives in one
// hierarchy only and both are bound to v1, and no virtual machine with
// another kernel boots here at a usable speed (the KVM is PVM-only; see
// the design notes). So the v2 counters are read from a tree laid out as
// the kernel shows v2, in a temporary directory. The kill and the removal
// run against the real cgroup2 mount in TestCgroupV2OnTheCgroup2Mount.

// v2Files is what the kernel shows in a non-root v2 cgroup with the cpu,
// memory and pids controllers enabled (the files the layout reads, and
// the library around them), with sample values from a 6.x kernel.
var v2Files = map[string]string{
	"cgroup.controllers":     "cpu memory pids\n",
	"cgroup.subtree_control": "",
	"cgroup.type":            "domain\n",
	"cgroup.procs":           "",
	"cgroup.threads":         "",
	"cgroup.events":          "populated 0\nfrozen 0\n",
	"cgroup.freeze":          "0\n",
	"cgroup.kill":            "",
	"cpu.stat":               "usage_usec 0\nuser_usec 0\nsystem_usec 0\ncore_sched.force_idle_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n",
	"cpu.max":                "max 100000\n",
	"cpu.weight":             "100\n",
	"memory.current":         "4493312\n",
	"memory.max":             "536870912\n",
	"memory.peak":            "8253440\n",
	"memory.events":          "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
	"memory.stat":            "anon 1441792\nfile 2523136\nkernel 528384\nsock 0\nshmem 0\npgfault 2178\npgmajfault 0\n",
	"pids.current":           "3\n",
	"pids.max":               "max\n",
}

// fakeV2 is a v2 tree at a temporary mount: the root cgroup with the
// controllers of a Debian 12 host, the parent, and a cgroup per id whose
// files override v2Files.
func fakeV2(t *testing.T, ids map[string]map[string]string) V2 {
	t.Helper()
	mount := t.TempDir()
	write := func(dir string, files map[string]string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(mount, map[string]string{
		"cgroup.controllers":     "cpuset cpu io memory hugetlb pids rdma misc\n",
		"cgroup.subtree_control": "",
		"cgroup.procs":           "1\n",
		"cgroup.threads":         "1\n",
		"cpu.stat":               "usage_usec 912381201\nuser_usec 601120011\nsystem_usec 311261190\n",
		"memory.stat":            "anon 912261120\nfile 3140407296\n",
	})
	c := newV2(mount, "withruntime")
	c.settle = 100 * time.Millisecond
	write(filepath.Join(mount, c.parent), v2Files)
	for id, over := range ids {
		files := map[string]string{}
		for k, v := range v2Files {
			files[k] = v
		}
		for k, v := range over {
			files[k] = v
		}
		write(filepath.Join(mount, c.parent, id), files)
	}
	return c
}

func TestCgroupV2CPUTime(t *testing.T) {
	c := fakeV2(t, map[string]map[string]string{
		"busy":  {"cpu.stat": "usage_usec 2500123\nuser_usec 2000000\nsystem_usec 500123\nnr_periods 40\nnr_throttled 12\nthrottled_usec 600000\n"},
		"idle":  {},
		"nocpu": {"cgroup.controllers": "memory pids\n", "cpu.stat": "usage_usec 777\nuser_usec 700\nsystem_usec 77\n"},
	})
	for _, tc := range []struct {
		name, id string
		want     time.Duration
		fails    bool
	}{
		{"usage_usec in microseconds", "busy", 2500123 * time.Microsecond, false},
		{"a sandbox that has not run", "idle", 0, false},
		// The library reads no cpu.stat without the controller: an error,
		// never a sandbox silently billed zero.
		{"cpu controller not enabled", "nocpu", 0, true},
		{"no such cgroup", "gone", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.CPUTime(tc.id)
			if tc.fails {
				if err == nil {
					t.Fatalf("got %v and no error, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestCgroupV2OOM(t *testing.T) {
	c := fakeV2(t, map[string]map[string]string{
		"calm":    {},
		"reached": {"memory.events": "low 0\nhigh 0\nmax 31\noom 0\noom_kill 0\noom_group_kill 0\n"},
		"killed":  {"memory.events": "low 0\nhigh 0\nmax 240\noom 1\noom_kill 1\noom_group_kill 0\n"},
	})
	for _, tc := range []struct {
		name, id string
		want     bool
	}{
		{"no event", "calm", false},
		{"limit reached, memory reclaimed", "reached", false},
		{"the OOM killer acted", "killed", true},
		{"no such cgroup", "gone", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := oomKilledIn(c, tc.id); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCgroupV2Sweep(t *testing.T) {
	c := fakeV2(t, map[string]map[string]string{
		"left":  {},
		"held":  {"cgroup.procs": "4242\n", "cgroup.events": "populated 1\nfrozen 0\n"},
		"other": {},
	})
	if got, want := sortedIDs(c.Leftovers()), []string{"held", "left", "other"}; !slices.Equal(got, want) {
		t.Fatalf("leftovers: got %v, want %v", got, want)
	}
	if err := c.Remove("left"); err != nil {
		t.Fatalf("removing an empty cgroup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.mount, c.parent, "left")); !os.IsNotExist(err) {
		t.Fatalf("the removed cgroup is still there: %v", err)
	}
	// The fake's processes never leave (no kernel acts on cgroup.kill
	// here): the removal gives up, as the kernel's rmdir would refuse.
	if err := c.Remove("held"); err == nil || !strings.Contains(err.Error(), "running tasks") {
		t.Fatalf("removing a cgroup with a process: got %v, want an error about running tasks", err)
	}
	// The processes were killed before the removal was tried.
	if kill, _ := os.ReadFile(filepath.Join(c.mount, c.parent, "held", "cgroup.kill")); string(kill) != "1" {
		t.Fatalf("cgroup.kill of the held cgroup: got %q, want 1", kill)
	}
	if err := c.Remove("gone"); err != nil {
		t.Fatalf("removing a cgroup that is not there: %v", err)
	}
	if got, want := sortedIDs(c.Leftovers()), []string{"held", "other"}; !slices.Equal(got, want) {
		t.Fatalf("leftovers after: got %v, want %v", got, want)
	}
}

// Before Linux 5.14 there is no cgroup.kill (Debian 11 is v2 on 5.10): the
// processes listed are killed one by one. The fake plays the kernel's
// part: a process leaves cgroup.procs when it ends.
func TestCgroupV2SweepWithoutCgroupKill(t *testing.T) {
	c := fakeV2(t, map[string]map[string]string{"old": {}})
	dir := filepath.Join(c.mount, c.parent, "old")
	os.Remove(filepath.Join(dir, "cgroup.kill"))
	c.settle = 30 * time.Second
	p := hold(t, "sleep 600")
	procs := filepath.Join(dir, "cgroup.procs")
	os.WriteFile(procs, []byte(strconv.Itoa(p.pid())+"\n"), 0o644)
	go func() {
		err := <-p.done
		os.WriteFile(procs, nil, 0o644)
		p.done <- err
	}()
	if err := c.Remove("old"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if !p.killed(t) {
		t.Fatal("the process in the cgroup was not killed")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the removed cgroup is still there: %v", err)
	}
}

func TestCgroupV2Prepare(t *testing.T) {
	for _, tc := range []struct {
		name, root, want string
	}{
		{"Debian 12 controllers", "cpuset cpu io memory hugetlb pids rdma misc\n", "+cpu +memory +pids"},
		{"no pids controller", "cpu io memory\n", "+cpu +memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeV2(t, nil)
			os.WriteFile(filepath.Join(c.mount, "cgroup.controllers"), []byte(tc.root), 0o644)
			if err := c.Prepare(); err != nil {
				t.Fatal(err)
			}
			// The root's and the parent's subtree_control give each
			// sandbox's cgroup the controllers.
			for _, dir := range []string{c.mount, filepath.Join(c.mount, c.parent)} {
				got, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
				if string(got) != tc.want {
					t.Errorf("%s: got %q, want %q", dir, got, tc.want)
				}
			}
		})
	}
}

func sortedIDs(ids []string) []string { return slices.Sorted(slices.Values(ids)) }

// oomKilledIn reports whether the kernel's OOM killer acted in id's cgroup.
func oomKilledIn(c Layout, id string) bool {
	n, ok := c.OOMKills(id)
	return ok && n > 0
}

func TestCgroupV2Memory(t *testing.T) {
	c := fakeV2(t, map[string]map[string]string{
		"busy": {"memory.stat": "anon 16777216\nfile 3140407296\nkernel 528384\nshmem 536870912\n"},
		"old":  {"memory.stat": "anon 16777216\nfile 0\n"},
	})
	// The page cache (file) is the host's to reclaim: not held.
	if got, err := c.MemoryHeld("busy"); err != nil || got != (16+512)<<20 {
		t.Fatalf("memoryHeld: got %d, %v; want %d", got, err, (16+512)<<20)
	}
	if _, err := c.MemoryHeld("old"); err == nil {
		t.Fatal("memoryHeld without shmem: got no error")
	}
	if _, err := c.MemoryHeld("gone"); err == nil {
		t.Fatal("memoryHeld of no cgroup: got no error")
	}
	if err := c.SetMemoryLimit("busy", 640<<20); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(c.mount, c.group("busy"), "memory.max")); string(got) != strconv.Itoa(640<<20) {
		t.Fatalf("memory.max: got %q", got)
	}
	if err := c.SetMemoryLimit("gone", 640<<20); err == nil {
		t.Fatal("setMemoryLimit of no cgroup: got no error")
	}
	if _, err := os.Stat(filepath.Join(c.mount, c.group("gone"))); !os.IsNotExist(err) {
		t.Fatalf("setMemoryLimit made a cgroup for a sandbox that is gone: %v", err)
	}
}

// TestCgroupV2NormalCPU: a claim writes the default weight over the 1
// runsc made of the warm shares, and makes no cgroup for a gone sandbox.
func TestCgroupV2NormalCPU(t *testing.T) {
	c := fakeV2(t, map[string]map[string]string{"warm": {"cpu.weight": "1\n"}})
	if err := c.NormalCPU("warm"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(c.mount, c.parent, "warm", "cpu.weight"))
	if string(got) != "100" {
		t.Fatalf("got cpu.weight %q, want 100", got)
	}
	if err := c.NormalCPU("gone"); err == nil {
		t.Fatal("claiming a sandbox with no cgroup: got no error, want one")
	}
	if _, err := os.Stat(filepath.Join(c.mount, c.parent, "gone")); !os.IsNotExist(err) {
		t.Fatalf("a claim made a cgroup for a gone sandbox: %v", err)
	}
}
