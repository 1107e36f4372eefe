package sandbox

import (
	"time"
)

// Spec is what a sandbox is asked to be. It is validated and filled with
// defaults before a backend sees it.
type Spec struct {
	Image      string            `json:"image"`
	VCPUs      int               `json:"vcpus"`
	MemoryMiB  int               `json:"memory_mib"`
	DiskMiB    int               `json:"disk_mib"`
	PidsLimit  int               `json:"pids_limit"`
	Timeout    time.Duration     `json:"timeout"`
	OnLeaseEnd LeaseEndAction    `json:"on_lease_end"`
	Env        map[string]string `json:"env,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
}

// Record is what the platform keeps about one sandbox: its spec and where
// it is in its life. It is what the store persists.
type Record struct {
	ID              string     `json:"id"`
	Account         string     `json:"account"`
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
}

// Live reports whether the sandbox holds resources on the host.
func (r *Record) Live() bool {
	return r.State == StateStarting || r.State == StateRunning
}
