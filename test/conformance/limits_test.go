package conformance

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// cpuUsage reads the host's CPU accounting of a sandbox's cgroup (runsc's
// under withruntime/, QEMU's under withruntime-vm/), on a v1 host or a
// pure v2 one.
func cpuUsage(t *testing.T, e *env, id string) time.Duration {
	t.Helper()
	parent := "withruntime"
	if e.backend == "microvm" {
		parent = "withruntime-vm"
	}
	if data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", parent, id, "cpu.stat")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return time.Duration(us) * time.Microsecond
			}
		}
	}
	for _, p := range []string{
		filepath.Join("/sys/fs/cgroup/cpuacct", parent, id, "cpuacct.usage"),
		filepath.Join("/sys/fs/cgroup/cpu,cpuacct", parent, id, "cpuacct.usage"),
	} {
		if data, err := os.ReadFile(p); err == nil {
			ns, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
			return time.Duration(ns)
		}
	}
	t.Fatalf("no CPU accounting for %s on this host", id)
	return 0
}

func TestCPULimitIsReal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		sb := e.create(t, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 1024, TimeoutSeconds: 600})
		before := cpuUsage(t, e, sb.ID)
		start := time.Now()
		// Two busy processes for two seconds: on one vCPU they share one
		// host CPU.
		e.out(t, sb.ID, "timeout 2 sh -c 'while :; do :; done' & timeout 2 sh -c 'while :; do :; done' & wait; true")
		wall := time.Since(start)
		used := cpuUsage(t, e, sb.ID) - before
		t.Logf("2 busy processes on 1 vCPU: %.2f s of CPU in %.2f s", used.Seconds(), wall.Seconds())
		if used > wall*115/100 {
			t.Fatalf("used %.2f s of CPU in %.2f s of wall time: more than one host CPU", used.Seconds(), wall.Seconds())
		}
		if used < wall/2 {
			t.Fatalf("used only %.2f s of CPU in %.2f s: the busy loops did not run", used.Seconds(), wall.Seconds())
		}
	})
}

func TestDiskQuota(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		sb := e.create(t, small())
		// The suite's server caps each sandbox's writable layer at
		// diskMiB; writing past it fails inside and harms nothing else.
		res := e.sh(t, sb.ID, "dd if=/dev/zero of=/workspace/big bs=1M count="+strconv.Itoa(diskMiB+64)+" 2>&1")
		if res.ExitCode == 0 || !strings.Contains(res.Stdout, "No space left") {
			t.Fatalf("writing past the quota: got exit %d %q, want ENOSPC", res.ExitCode, res.Stdout)
		}
		e.out(t, sb.ID, "rm /workspace/big")
		if got := e.out(t, sb.ID, "echo ok > /workspace/small && cat /workspace/small"); got != "ok" {
			t.Fatalf("after freeing the disk: got %q", got)
		}
	})
}
