package httpapi

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Sandboxes is what the server needs of the manager. Every method acts for
// account and reports a sandbox of another account as not found. Errors
// carry a sandbox.Kind; errors without one are answered as internal.
type Sandboxes interface {
	// Create makes a sandbox for account; keyID is the key that asked, whose
	// daily spending limit the sandbox counts against.
	Create(ctx context.Context, account, keyID string, req api.CreateSandboxRequest) (*sandbox.Record, error)
	Get(ctx context.Context, account, id string) (*sandbox.Record, error)
	List(ctx context.Context, account string) ([]*sandbox.Record, error)
	Extend(ctx context.Context, account, id string, timeout time.Duration) (*sandbox.Record, error)
	// SetLease is Extend that may also shorten the lease (extend with exact).
	SetLease(ctx context.Context, account, id string, timeout time.Duration) (*sandbox.Record, error)
	Stop(ctx context.Context, account, id string) (*sandbox.Record, error)
	Pause(ctx context.Context, account, id string) (*sandbox.Record, error)
	Resume(ctx context.Context, account, id string) (*sandbox.Record, error)
	// Agent returns a round tripper to the sandbox's in-sandbox agent; it
	// fails with a conflict-kind error unless the sandbox is running
	// (lease_ended kind when the sandbox ended because its lease ran out).
	//
	// The server sends it requests for http://sandbox-agent/PATH, PATH being
	// one of the agent's routes (/exec, /files/list, ...) with the client's
	// query; the round tripper must carry them to this sandbox's agent
	// whatever the URL's host says. Requests never carry the client's
	// Authorization header.
	Agent(ctx context.Context, account, id string) (http.RoundTripper, error)
	// SetNetwork replaces the egress policy of a sandbox; new connections
	// and DNS queries follow it at once.
	SetNetwork(ctx context.Context, account, id string, n api.Network) (*sandbox.Record, error)
	// Egress returns the sandbox's egress log, the newest events last.
	Egress(ctx context.Context, account, id string) ([]api.EgressEvent, error)
}

// SandboxView is a record as the API shows it. Environment values are left
// out: they may hold credentials.
func SandboxView(r *sandbox.Record) api.Sandbox {
	v := api.Sandbox{
		ID:              r.ID,
		State:           string(r.State),
		Isolation:       r.Spec.Isolation,
		Image:           r.Spec.Image,
		VCPUs:           r.Spec.VCPUs,
		MemoryMiB:       r.Spec.MemoryMiB,
		DiskGiB:         (r.Spec.DiskMiB + 1023) >> 10, // a test server's sub-GiB default shows as 1
		OnLeaseEnd:      string(r.Spec.OnLeaseEnd),
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
