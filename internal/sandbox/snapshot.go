package sandbox

import "time"

// Snapshot is a running sandbox saved whole (memory, processes, disk), from
// which new sandboxes start where it was (Snapshotter). It belongs to the
// account of the sandbox it was taken of, and lives on the node that took
// it until it is removed or its retention ends.
type Snapshot struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	// Name is the caller's label ("": none); not unique.
	Name string `json:"name,omitempty"`
	// SandboxID is the sandbox it was taken of.
	SandboxID string `json:"sandbox_id"`
	// Spec is the source's spec when it was taken: what a sandbox started
	// from it is (isolation, image, size, env), less what each new
	// sandbox sets for itself (network, lease, metadata).
	Spec Spec `json:"spec"`
	// Node is the node whose disk holds it ("" on a single box), and
	// Compat what restoring it needs (the runsc build and CPU features:
	// Node.Compat).
	Node   string `json:"node,omitempty"`
	Compat string `json:"compat,omitempty"`
	// SizeBytes is what it takes on disk; it counts in the account's
	// storage quota.
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when its retention ends and it is removed.
	ExpiresAt time.Time `json:"expires_at"`
	// FreezeMs is how long the source's processes stood still for it.
	FreezeMs int64 `json:"freeze_ms"`
	// KeyID is the key its storage is billed to: the source sandbox's.
	KeyID string `json:"key_id,omitempty"`
	// BilledUntil is how far its storage is in the ledger (zero: not
	// yet, billed from CreatedAt).
	BilledUntil time.Time `json:"billed_until,omitzero"`
}
