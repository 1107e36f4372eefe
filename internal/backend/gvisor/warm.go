package gvisor

import (
	"context"

	"github.com/withruntime/withruntime/internal/agentlink"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// A pool member waits at the lowest CPU priority (hostcgroup.WarmShares),
// so that booting and idling spare sandboxes never takes CPU from live
// ones' work; once claimed it has the kernel's default, like any other.
// runsc writes the spec's shares to cpu.shares on cgroup v1 and turns them
// into cpu.weight 1 on v2.

var _ sandbox.Warmer = (*Backend)(nil)

// StartWarm implements sandbox.Warmer: Start, at the lowest CPU priority,
// then one run of python3 that fills the new sandbox's own caches.
func (b *Backend) StartWarm(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	inst, err := b.start(ctx, id, spec, true)
	if err != nil {
		return nil, err
	}
	agentlink.WarmCaches(ctx, inst.DialAgent)
	return inst, nil
}

// Claim implements sandbox.Warmer: the sandbox's cgroup gets the default
// CPU priority. A sandbox with no cgroup (gone) is an error.
func (b *Backend) Claim(ctx context.Context, id string) error {
	return hostCgroups().NormalCPU(id)
}
