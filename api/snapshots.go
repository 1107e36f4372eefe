package api

import "time"

// Snapshot is a running sandbox saved whole: its memory, processes and
// disk. POST /v1/sandboxes {"snapshot": ID} starts a sandbox from it.
type Snapshot struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	SandboxID string `json:"sandbox_id"`
	Isolation string `json:"isolation"`
	// Template is what the sandbox started from ("default": the built-in
	// image).
	Template  string `json:"template"`
	VCPUs     int    `json:"vcpus"`
	MemoryMiB int    `json:"memory_mib"`
	// SizeBytes is what it takes on disk: it counts in the account's
	// storage quota.
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when its retention ends and it is removed.
	ExpiresAt time.Time `json:"expires_at"`
	// FreezeMs is how long the sandbox did not answer while it was taken.
	FreezeMs int64 `json:"freeze_ms"`
}

// SnapshotList is the answer of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// CreateSnapshotRequest is the body of POST /v1/sandboxes/{id}/snapshots
// (it may be empty).
type CreateSnapshotRequest struct {
	// Name is a label of the caller's, at most 128 bytes.
	Name string `json:"name,omitempty"`
}

// ForkRequest is the body of POST /v1/sandboxes/{id}/fork.
type ForkRequest struct {
	// Count is how many sandboxes to start, 1 to 16 (0: 1).
	Count int `json:"count,omitempty"`
	// KeepSnapshot keeps the snapshot the forks started from; without it
	// the snapshot is removed once they run.
	KeepSnapshot bool `json:"keep_snapshot,omitempty"`
}

// ForkResult is the answer of POST /v1/sandboxes/{id}/fork.
type ForkResult struct {
	Sandboxes []Sandbox `json:"sandboxes"`
	// Snapshot is the snapshot they started from, when it was kept.
	Snapshot *Snapshot `json:"snapshot,omitempty"`
}
