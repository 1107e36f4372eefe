package hostcgroup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/testenv"
)

// held is a process the test started and holds on its stdin: it does
// nothing until released, so that it is in its cgroup before it runs.
type held struct {
	cmd   *exec.Cmd
	start io.WriteCloser
	done  chan error
}

func hold(t *testing.T, script string) *held {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read go; "+script)
	start, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &held{cmd: cmd, start: start, done: make(chan error, 1)}
	go func() { h.done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-h.done })
	return h
}

func (h *held) pid() int { return h.cmd.Process.Pid }

func (h *held) release(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(h.start, "go\n"); err != nil {
		t.Fatal(err)
	}
}

// killed waits for the process's end and tells whether SIGKILL ended it.
func (h *held) killed(t *testing.T) bool {
	t.Helper()
	select {
	case err := <-h.done:
		h.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			ws, ok := ee.Sys().(syscall.WaitStatus)
			return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
		}
		return false
	case <-time.After(30 * time.Second):
		t.Fatalf("process %d did not end", h.pid())
		return false
	}
}

// testParent is a parent of the test's own, beside the real one: the
// servers on this host never see it as theirs.
func testParent() string { return fmt.Sprintf("withruntime-test-%d", os.Getpid()) }

// TestCgroupV1OnThisHost runs the v1 layout against the kernel's v1
// hierarchies: the cgroups are made as runsc makes them (one per
// hierarchy, with a memory limit), real processes run in them, and the
// counters, the OOM killer's mark, the kill and the removal are the
// kernel's.
func TestCgroupV1OnThisHost(t *testing.T) {
	testenv.RequiresRoot(t)
	if m := cgroups.Mode(); m != cgroups.Legacy && m != cgroups.Hybrid {
		t.Skip("no cgroup v1 hierarchies on this host")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("no python3 to fill memory with")
	}
	c := newV1(Root, testParent())
	t.Cleanup(func() {
		for _, s := range v1Subsystems(Root) {
			os.Remove(s.(v1Pather).Path("/" + c.parent))
		}
	})
	if err := c.Prepare(); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	cpus, _ := os.ReadFile(filepath.Join(Root, "cpuset", c.parent, "cpuset.cpus"))
	if len(cpus) <= 1 {
		t.Fatalf("the parent cpuset has no CPUs (%q): runsc could not place a sandbox", cpus)
	}
	limit := int64(48 << 20)
	newGroup := func(id string, res *specs.LinuxResources) cgroup1.Cgroup {
		cg, err := cgroup1.New(cgroup1.StaticPath(c.group(id)), res, cgroup1.WithHierarchy(c.hierarchy()))
		if err != nil {
			t.Fatalf("making %s: %v", id, err)
		}
		t.Cleanup(func() { c.Remove(id) })
		return cg
	}
	busy := newGroup("busy", &specs.LinuxResources{})
	hog := newGroup("hog", &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &limit}})

	spin := hold(t, "while :; do :; done")
	if err := busy.AddProc(uint64(spin.pid())); err != nil {
		t.Fatal(err)
	}
	spin.release(t)
	// Liveness only: however loaded the host, the loop gets some CPU.
	var used time.Duration
	for deadline := time.Now().Add(30 * time.Second); used < 200*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		if used, err = c.CPUTime("busy"); err != nil {
			t.Fatalf("cpuTime: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %v of CPU after 30 s of a busy loop, want at least 200ms", used)
		}
	}

	fill := hold(t, "exec "+python+" -c 'x = b\"x\" * (256 << 20)'")
	if err := hog.AddProc(uint64(fill.pid())); err != nil {
		t.Fatal(err)
	}
	fill.release(t)
	if !fill.killed(t) {
		t.Fatalf("256 MiB under a %d MiB limit: the process was not killed", limit>>20)
	}
	if !oomKilledIn(c, "hog") {
		t.Fatal("oomKilled(hog): got false after the OOM killer acted, want true")
	}
	if oomKilledIn(c, "busy") {
		t.Fatal("oomKilled(busy): got true, want false")
	}

	if got, want := c.Leftovers(), []string{"busy", "hog"}; !slices.Equal(got, want) {
		t.Fatalf("leftovers: got %v, want %v", got, want)
	}
	// The sweep's removal kills what is left (the busy loop) and removes
	// the cgroup from every hierarchy.
	removeV1(t, c, spin, "busy", "hog")
	if _, err := c.CPUTime("busy"); err == nil {
		t.Fatal("cpuTime of a removed cgroup: got no error")
	}
}

// removeV1 removes the cgroups of ids: the process p in them is killed,
// and no hierarchy keeps a cgroup of theirs.
func removeV1(t *testing.T, c V1, p *held, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := c.Remove(id); err != nil {
			t.Fatalf("remove %s: %v", id, err)
		}
	}
	if !p.killed(t) {
		t.Fatal("the process outlived the removal of its cgroup")
	}
	for _, s := range v1Subsystems(Root) {
		for _, id := range ids {
			if _, err := os.Stat(s.(v1Pather).Path(c.group(id))); !os.IsNotExist(err) {
				t.Errorf("%s: the removed cgroup of %s is still there: %v", s.Name(), id, err)
			}
		}
	}
	if got := c.Leftovers(); len(got) != 0 {
		t.Fatalf("leftovers after the removal: got %v, want none", got)
	}
}

// TestCgroupV2OnTheCgroup2Mount runs the v2 layout against the kernel's
// cgroup2 file system: /sys/fs/cgroup on a pure v2 host, the hybrid mount
// at /sys/fs/cgroup/unified here. It proves what the fake tree cannot:
// the parent is made, a real process is found in cgroup.procs, killed by
// cgroup.kill, and the cgroup goes with rmdir. Where the cpu controller
// is not available to the mount (here it is bound to v1), metering must
// say so rather than read zero.
func TestCgroupV2OnTheCgroup2Mount(t *testing.T) {
	testenv.RequiresRoot(t)
	mount := Root
	if cgroups.Mode() != cgroups.Unified {
		mount = filepath.Join(Root, "unified")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Skip("no cgroup2 mount on this host")
	}
	c := newV2(mount, testParent())
	t.Cleanup(func() {
		os.Remove(filepath.Join(mount, c.parent, "spin"))
		os.Remove(filepath.Join(mount, c.parent))
	})
	if err := c.Prepare(); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mount, c.parent, "cgroup.procs")); err != nil {
		t.Fatalf("the parent is not a cgroup: %v", err)
	}
	// runsc makes each sandbox's cgroup with mkdir and puts its processes
	// in cgroup.procs.
	leaf := filepath.Join(mount, c.parent, "spin")
	if err := os.Mkdir(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	spin := hold(t, "while :; do :; done")
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(spin.pid())), 0o644); err != nil {
		t.Fatal(err)
	}
	spin.release(t)

	ctrls, _ := os.ReadFile(filepath.Join(leaf, "cgroup.controllers"))
	if slices.Contains(strings.Fields(string(ctrls)), "cpu") {
		var used time.Duration
		var err error
		for deadline := time.Now().Add(30 * time.Second); used < 200*time.Millisecond; time.Sleep(20 * time.Millisecond) {
			if used, err = c.CPUTime("spin"); err != nil {
				t.Fatalf("cpuTime: %v", err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("got %v of CPU after 30 s of a busy loop, want at least 200ms", used)
			}
		}
	} else if got, err := c.CPUTime("spin"); err == nil {
		t.Fatalf("no cpu controller in %q: got %v and no error, want an error", ctrls, got)
	}

	if got, want := c.Leftovers(), []string{"spin"}; !slices.Equal(got, want) {
		t.Fatalf("leftovers: got %v, want %v", got, want)
	}
	if err := c.Remove("spin"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if !spin.killed(t) {
		t.Fatal("the busy loop outlived the removal of its cgroup")
	}
	if _, err := os.Stat(leaf); !os.IsNotExist(err) {
		t.Fatalf("the removed cgroup is still there: %v", err)
	}
	if got := c.Leftovers(); len(got) != 0 {
		t.Fatalf("leftovers after the removal: got %v, want none", got)
	}
}
