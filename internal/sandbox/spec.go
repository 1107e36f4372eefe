package sandbox

import (
	"slices"
	"time"
)

// Spec is what a sandbox is asked to be. It is validated and filled with
// defaults before a backend sees it.
type Spec struct {
	// Isolation names the backend the sandbox runs on (IsolationGVisor,
	// IsolationMicroVM); validated specs always name one. Records from
	// before it existed have "" and name it in Record.Backend.
	Isolation string `json:"isolation,omitempty"`
	// Image is what the create named: "default" (the built-in image) or
	// a template's "name:tag".
	Image string `json:"image"`
	// Root is the template's file system when Image names one (nil: the
	// built-in image).
	Root *Root `json:"root,omitempty"`
	// Workdir and User are the template's defaults for commands and
	// relative paths ("": /workspace, and the sandbox user "user"; or
	// "root").
	Workdir string `json:"workdir,omitempty"`
	User    string `json:"user,omitempty"`
	// StartCmd is a shell command the sandbox starts in the background as
	// soon as it is up; its create answers once ReadyCmd, a shell command
	// tried again and again, exits 0 (within ReadyTimeout).
	StartCmd     string            `json:"start_cmd,omitempty"`
	ReadyCmd     string            `json:"ready_cmd,omitempty"`
	ReadyTimeout time.Duration     `json:"ready_timeout,omitempty"`
	VCPUs        int               `json:"vcpus"`
	MemoryMiB    int               `json:"memory_mib"`
	DiskMiB      int               `json:"disk_mib"`
	PidsLimit    int               `json:"pids_limit"`
	Timeout      time.Duration     `json:"timeout"`
	OnLeaseEnd   LeaseEndAction    `json:"on_lease_end"`
	Env          map[string]string `json:"env,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	// Network is the egress policy; the zero value is no network.
	Network Network `json:"network"`
	// MaxCostMicros caps what a lease may cost at full CPU (nil: no cap).
	MaxCostMicros *int64 `json:"max_cost_micros,omitempty"`
	// AutoResume has a paused sandbox resumed by the next call that
	// needs it running (exec, files, code, a preview or port forward).
	AutoResume bool `json:"auto_resume,omitempty"`
	// Volumes are the named volumes mounted into the sandbox, resolved at
	// create (internal/volume).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// VolumeMount is one volume in a sandbox: the volume's record (ID) and
// name as the create resolved them, where it appears inside the sandbox,
// and the host directory the backend binds there (the volume's mounted
// file system, internal/volume).
type VolumeMount struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
	HostDir  string `json:"host_dir"`
}

// Root is the file system of a sandbox started from a template: a base
// image and layers over it, each stored once on the node by digest
// (internal/layer).
type Root struct {
	// Template is the template's id: a template removed while sandboxes
	// use it keeps its storage until the last of them ends.
	Template string `json:"template"`
	// Base is the built-in image under the layers ("default"), or "" when
	// the layers are a whole file system of their own (an OCI image).
	Base string `json:"base,omitempty"`
	// Layers are the layers' digests, lowest first.
	Layers []string `json:"layers"`
}

// Network is a sandbox's egress policy: nothing without Internet; with it,
// every public address when Allow is empty, else only the names in Allow
// (exact, or "*.example.org" for the names under example.org).
type Network struct {
	Internet bool     `json:"internet"`
	Allow    []string `json:"allow,omitempty"`
}

// Record is what the platform keeps about one sandbox: its spec and where
// it is in its life. It is what the store persists.
type Record struct {
	ID              string     `json:"id"`
	Account         string     `json:"account"`
	KeyID           string     `json:"key_id,omitempty"` // the key that created it: its spending counts there
	Backend         string     `json:"backend"`
	Spec            Spec       `json:"spec"`
	State           State      `json:"state"`
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	PausedAt        *time.Time `json:"paused_at,omitempty"`
	EndedAt         *time.Time `json:"ended_at,omitempty"`
	LeaseEndsAt     time.Time  `json:"lease_ends_at"`
	RetentionEndsAt *time.Time `json:"retention_ends_at,omitempty"`
	EndReason       EndReason  `json:"end_reason,omitempty"`
	EndMessage      string     `json:"end_message,omitempty"`
	Usage           Usage      `json:"usage"`
	// Node is the id of the node that holds the sandbox ("" on a single
	// box, whose one process is its only node).
	Node string `json:"node,omitempty"`
	// NodeEpoch is the node's registration (store.Node.Epoch) under which
	// the sandbox became live there: a failure detector that gave up on
	// epoch E ends only records of epochs up to E, never those a node that
	// came back (a later epoch) took since.
	NodeEpoch int64 `json:"node_epoch,omitempty"`
	// Version is the store's generation of the record: every write must
	// carry the version it read, and the store bumps it (0: a record that
	// is not stored yet). A write with an older version fails with
	// store.ErrStale, so two processes never both act on one read.
	Version int64 `json:"version,omitempty"`
	// Checkpoint says where a paused sandbox's checkpoint is kept and what
	// can restore it (nil when it is on its node's own disk).
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Preview is the sandbox's preview settings (nil: every port private,
	// no token revoked).
	Preview *Preview `json:"preview,omitempty"`
}

// Preview is what a sandbox's preview URLs let through.
type Preview struct {
	// PublicPorts are the ports served without a key or a token, sorted;
	// AllPublic serves every port so (E2B's public traffic).
	PublicPorts []int `json:"public_ports,omitempty"`
	AllPublic   bool  `json:"all_public,omitempty"`
	// Generation is in every preview token made for the sandbox: a revoke
	// bumps it, and the tokens made before stop working.
	Generation int64 `json:"generation,omitempty"`
}

// Checkpoint is where a paused sandbox's saved state lives when it is in
// storage that many nodes share, and what a node must offer to restore it.
type Checkpoint struct {
	// Shared is true when the checkpoint sits in the nodes' shared
	// checkpoint storage, so that any compatible node may resume it.
	Shared bool `json:"shared"`
	// Compat is what restoring needs: the runsc build and the CPU features
	// of the node that saved it (Node.Compat).
	Compat string `json:"compat"`
	// Digest is what the backend that saved the checkpoint says of it
	// (CheckpointDigester; gVisor: "sha256:" and the hex of its files):
	// the shared storage is written by every node, so a resume restores
	// only a checkpoint that still has it ("": none was taken).
	Digest string `json:"digest,omitempty"`
}

// Usage is what a sandbox has used and cost so far. The meter advances it
// and the usage ledger in one store transaction, so that a restart neither
// loses nor repeats any of it.
type Usage struct {
	// AliveMs is the time the sandbox held its memory (running), and
	// PausedMs the time it was kept paused.
	AliveMs  int64 `json:"alive_ms"`
	PausedMs int64 `json:"paused_ms"`
	// MemoryMiBMs is the memory size times the time alive: memory is billed
	// at the sandbox's size for its whole life.
	MemoryMiBMs int64 `json:"memory_mib_ms"`
	// CPUNs is the CPU time the sandbox consumed on the host.
	CPUNs int64 `json:"cpu_ns"`
	// CostNanos is the cost so far, in USD billionths (the API shows
	// millionths).
	CostNanos int64 `json:"cost_nanos"`
	// SampledAt is the wall time the meter has counted to, and CPUCounterNs
	// the backend's CPU counter then (it restarts at 0 on every start and
	// resume).
	SampledAt    time.Time `json:"sampled_at"`
	CPUCounterNs int64     `json:"cpu_counter_ns"`
}

// Live reports whether the sandbox holds resources on the host.
func (r *Record) Live() bool {
	return r.State == StateStarting || r.State == StateRunning
}

// IsPublic says whether port is served with no key or token (p may be
// nil: nothing is).
func (p *Preview) IsPublic(port int) bool {
	return p != nil && (p.AllPublic || slices.Contains(p.PublicPorts, port))
}
