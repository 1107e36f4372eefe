package microvm

import (
	"context"

	"github.com/withruntime/withruntime/internal/agentlink"
	"github.com/withruntime/withruntime/internal/sandbox"
)

var _ sandbox.Warmer = (*Backend)(nil)

// StartWarm implements sandbox.Warmer: Start with QEMU's cgroup at the
// lowest CPU priority (hostcgroup.WarmShares), so that a pool member's
// boot and its idle guest never take CPU from live sandboxes, then one run
// of python3 that fills the guest's caches. A resume boots at the default
// priority: a paused member is claimed already.
func (b *Backend) StartWarm(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	inst, err := b.start(ctx, id, spec, true)
	if err != nil {
		return nil, err
	}
	agentlink.WarmCaches(ctx, inst.DialAgent)
	return inst, nil
}

// Claim implements sandbox.Warmer: QEMU's cgroup gets the default CPU
// priority. A sandbox with no cgroup (gone) is an error.
func (b *Backend) Claim(ctx context.Context, id string) error {
	return b.cg.NormalCPU(id)
}
