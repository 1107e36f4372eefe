package gvisor

import (
	"context"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// The CPU priorities of a sandbox. A pool member waits at the lowest, so
// that booting and idling spare sandboxes never takes CPU from live ones'
// work; once claimed it has the kernel's default, like any other.
const (
	// warmShares is the OCI spec's lowest cpu.shares. runsc writes it to
	// cpu.shares on cgroup v1 and turns it into cpu.weight 1 on v2.
	warmShares = 2
	// v1DefaultShares and v2DefaultWeight are the kernel's defaults for a
	// new cgroup: what a sandbox that did not boot warm has.
	v1DefaultShares = 1024
	v2DefaultWeight = 100
)

var _ sandbox.Warmer = (*Backend)(nil)

// StartWarm implements sandbox.Warmer: Start, at the lowest CPU priority.
func (b *Backend) StartWarm(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	return b.start(ctx, id, spec, true)
}

// Claim implements sandbox.Warmer: the sandbox's cgroup gets the default
// CPU priority. A sandbox with no cgroup (gone) is an error.
func (b *Backend) Claim(ctx context.Context, id string) error {
	return hostCgroups().normalCPU(id)
}
