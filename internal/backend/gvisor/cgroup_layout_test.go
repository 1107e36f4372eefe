package gvisor

import (
	"testing"

	runsccgroup "gvisor.dev/gvisor/runsc/cgroup"

	"github.com/withruntime/withruntime/internal/hostcgroup"
)

// TestCgroupLayoutIsRunscs checks that the layout read here is the one
// runsc writes on this host: v2 exactly where runsc sees only cgroup v2
// (a hybrid host such as this machine is v1 to runsc, its cgroup2 mount
// unused).
func TestCgroupLayoutIsRunscs(t *testing.T) {
	_, v2 := hostCgroups().(hostcgroup.V2)
	if want := runsccgroup.IsOnlyV2(); v2 != want {
		t.Fatalf("layout %T: got v2 %v, want %v as runsc decides", hostCgroups(), v2, want)
	}
	t.Logf("layout %T", hostCgroups())
}
