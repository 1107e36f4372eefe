package service

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Sandboxes is what a front door needs of the sandboxes. Every method acts
// for account and reports a sandbox of another account as not found.
// Errors carry a sandbox.Kind; errors without one are answered as
// internal.
type Sandboxes interface {
	Reads
	Acts
}

// Reads are the methods that only read records. On a many-host
// installation they go to the store, not to a node.
type Reads interface {
	Get(ctx context.Context, account, id string) (*sandbox.Record, error)
	List(ctx context.Context, account string) ([]*sandbox.Record, error)
}

// Acts are the methods that act on a sandbox where it runs: what the node
// RPC serves of a node's manager.
type Acts interface {
	// Create makes a sandbox for account; keyID is the key that asked, whose
	// daily spending limit the sandbox counts against.
	Create(ctx context.Context, account, keyID string, req CreateRequest) (*sandbox.Record, error)
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
	// The caller sends it requests for http://sandbox-agent/PATH, PATH being
	// one of the agent's routes (/exec, /files/list, ...) with the client's
	// query; the round tripper must carry them to this sandbox's agent
	// whatever the URL's host says. Requests never carry the client's
	// Authorization header.
	Agent(ctx context.Context, account, id string) (http.RoundTripper, error)
	// SetNetwork replaces the egress policy of a sandbox; new connections
	// and DNS queries follow it at once.
	SetNetwork(ctx context.Context, account, id string, n sandbox.Network) (*sandbox.Record, error)
	// Egress returns the sandbox's egress log, the newest events last.
	Egress(ctx context.Context, account, id string) ([]egress.Event, error)
}

// CreateRequest is a create as the sandboxes take it: the API's request
// (api.CreateSandboxRequest) as the API edge decoded it, cut it to a
// trial's size and converted it (internal/httpapi). Zero values take the
// server's defaults. Its values are checked by the manager that runs the
// sandbox, against that server's settings.
//
// It is also the node RPC's create body (internal/noderpc), so its JSON
// names are the API's: an API server and a node of different releases
// read each other's creates.
type CreateRequest struct {
	Isolation string `json:"isolation,omitempty"` // "": the server's default
	Image     string `json:"image,omitempty"`
	VCPUs     int    `json:"vcpus,omitempty"`
	MemoryMiB int    `json:"memory_mib,omitempty"`
	// DiskGiB nil is the default; 0 is refused, not a default.
	DiskGiB        *int                   `json:"disk_gib,omitempty"`
	TimeoutSeconds int                    `json:"timeout_seconds,omitempty"`
	OnLeaseEnd     sandbox.LeaseEndAction `json:"on_lease_end,omitempty"`
	AutoResume     bool                   `json:"auto_resume,omitempty"`
	Env            map[string]string      `json:"env,omitempty"`
	Metadata       map[string]string      `json:"metadata,omitempty"`
	// Network is the egress policy asked for; the zero value is none
	// (no internet), as an absent one is.
	Network       sandbox.Network `json:"network,omitzero"`
	MaxCostMicros *int64          `json:"max_cost_micros,omitempty"`
	// Snapshot starts the sandbox from a snapshot of the account
	// (sandbox.Snapshot): its isolation, image and size are the
	// snapshot's, so the request must not name others.
	Snapshot string `json:"snapshot,omitempty"`
	// Volumes are the named volumes to mount, resolved by the API edge
	// (internal/volume) to the volumes' records and host dirs.
	Volumes []sandbox.VolumeMount `json:"volumes,omitempty"`
}

// Snapshots is what snapshots and forks need of the sandboxes (a
// manager, or the many-host control plane, which forwards them to the
// nodes). A Sandboxes without it answers them not_supported.
type Snapshots interface {
	// Snapshot saves running sandbox id whole; it keeps running.
	Snapshot(ctx context.Context, account, id, name string) (*sandbox.Snapshot, error)
	// Fork is a snapshot of running sandbox id and count sandboxes
	// started from it, all or none; keep says whether the snapshot is
	// kept afterwards (else it is removed and nil returned).
	Fork(ctx context.Context, account, keyID, id string, count int, keep bool) (*sandbox.Snapshot, []*sandbox.Record, error)
	GetSnapshot(ctx context.Context, account, id string) (*sandbox.Snapshot, error)
	ListSnapshots(ctx context.Context, account string) ([]*sandbox.Snapshot, error)
	DeleteSnapshot(ctx context.Context, account, id string) error
}

// Ports is what preview URLs and port forwards need of the sandboxes. A
// Sandboxes without it (the many-host control plane, for now) answers
// them not_supported.
type Ports interface {
	// DialPort returns a TCP connection to port on the sandbox's loopback.
	DialPort(ctx context.Context, account, id string, port int) (net.Conn, error)
	// SetPreview changes the sandbox's preview settings: change edits a
	// copy.
	SetPreview(ctx context.Context, account, id string, change func(*sandbox.Preview) error) (*sandbox.Record, error)
	// Lookup returns the record of id whatever its account: what a request
	// with no credential to a public port needs. Its caller must answer
	// exactly as for a sandbox that does not exist unless the port is
	// public.
	Lookup(ctx context.Context, id string) (*sandbox.Record, error)
}

// Metrics is what GET /v1/sandboxes/{id}/metrics needs of the sandboxes; a
// Sandboxes without it answers not_supported.
type Metrics interface {
	// Metrics returns a sandbox's samples from start to end (zero times:
	// open), oldest first.
	Metrics(ctx context.Context, account, id string, start, end time.Time) ([]sandbox.Metric, error)
}
