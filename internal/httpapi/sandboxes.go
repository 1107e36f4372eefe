package httpapi

import (
	"maps"
	"slices"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// SandboxView is a record as the API shows it. Environment values are left
// out: they may hold credentials.
func SandboxView(r *sandbox.Record) api.Sandbox {
	v := api.Sandbox{
		ID:              r.ID,
		State:           string(r.State),
		Isolation:       r.Spec.Isolation,
		Template:        r.Spec.Image,
		Image:           r.Spec.Image,
		VCPUs:           r.Spec.VCPUs,
		MemoryMiB:       r.Spec.MemoryMiB,
		DiskGiB:         (r.Spec.DiskMiB + 1023) >> 10, // a test server's sub-GiB default shows as 1
		OnLeaseEnd:      string(r.Spec.OnLeaseEnd),
		AutoResume:      r.Spec.AutoResume,
		Network:         NetworkView(r.Spec.Network),
		CreatedAt:       r.CreatedAt,
		StartedAt:       r.StartedAt,
		PausedAt:        r.PausedAt,
		EndedAt:         r.EndedAt,
		LeaseEndsAt:     r.LeaseEndsAt,
		RetentionEndsAt: r.RetentionEndsAt,
		EndReason:       string(r.EndReason),
		EndMessage:      r.EndMessage,
		CostMicros:      billing.Micros(r.Usage.CostNanos),
		Node:            r.Node,
		Usage: api.SandboxUsage{
			Seconds:          float64(r.Usage.AliveMs) / 1e3,
			CPUSeconds:       float64(r.Usage.CPUNs) / 1e9,
			MemoryGiBSeconds: float64(r.Usage.MemoryMiBMs) / 1024 / 1e3,
		},
	}
	if v.Isolation == "" {
		v.Isolation = r.Backend // a record from before specs named it
	}
	if len(r.Spec.Metadata) > 0 {
		v.Metadata = maps.Clone(r.Spec.Metadata)
	}
	for _, m := range r.Spec.Volumes {
		v.Volumes = append(v.Volumes, api.VolumeMount{Name: m.Name, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return v
}

// NetworkView is a sandbox's egress policy as the API shows it.
func NetworkView(n sandbox.Network) api.Network {
	v := api.Network{Internet: n.Internet}
	if len(n.Allow) > 0 {
		v.Allow = slices.Clone(n.Allow)
	}
	return v
}
