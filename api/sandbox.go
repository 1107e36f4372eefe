package api

import "time"

// Network is a sandbox's egress policy: nothing without Internet; with it
// every public address, or only the names in Allow (exact, or "*." for
// every name under a domain).
type Network struct {
	Internet bool     `json:"internet"`
	Allow    []string `json:"allow,omitempty"`
}

// CreateSandboxRequest is the body of POST /v1/sandboxes. Zero values take
// the server's defaults.
type CreateSandboxRequest struct {
	Isolation string `json:"isolation,omitempty"` // "": the server's default
	// Template names the template to start from, "name[:tag]" ("" and
	// "default": the built-in image). Image is an older name of the same
	// field: give one of them, or both the same.
	Template       string            `json:"template,omitempty"`
	Image          string            `json:"image,omitempty"`
	VCPUs          int               `json:"vcpus,omitempty"`
	MemoryMiB      int               `json:"memory_mib,omitempty"`
	DiskGiB        *int              `json:"disk_gib,omitempty"` // nil: the default; 0 is refused, not a default
	TimeoutSeconds int               `json:"timeout_seconds,omitempty"`
	OnLeaseEnd     string            `json:"on_lease_end,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Network        *Network          `json:"network,omitempty"`
	MaxCostMicros  *int64            `json:"max_cost_micros,omitempty"`
	// Snapshot starts the sandbox from a snapshot of the account: its
	// processes go on where they were. Isolation, template, size and disk
	// are the snapshot's: leave them out.
	Snapshot string `json:"snapshot,omitempty"`
	// AutoResume: a paused sandbox is resumed by the next exec, file,
	// code, preview or port-forward call, which then proceeds.
	AutoResume bool `json:"auto_resume,omitempty"`
	// Volumes are named volumes to mount (POST /v1/volumes makes them).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// Sandbox is a sandbox as the API shows it. Environment values are never
// shown: they may hold credentials.
type Sandbox struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Isolation string `json:"isolation"`
	// Template is the template it started from ("default": the built-in
	// image), as "name:tag"; Image is the same, under its older name.
	Template        string            `json:"template"`
	Image           string            `json:"image"`
	VCPUs           int               `json:"vcpus"`
	MemoryMiB       int               `json:"memory_mib"`
	DiskGiB         int               `json:"disk_gib"`
	OnLeaseEnd      string            `json:"on_lease_end"`
	AutoResume      bool              `json:"auto_resume"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	Network         Network           `json:"network"`
	CreatedAt       time.Time         `json:"created_at"`
	StartedAt       *time.Time        `json:"started_at,omitempty"`
	PausedAt        *time.Time        `json:"paused_at,omitempty"`
	EndedAt         *time.Time        `json:"ended_at,omitempty"`
	LeaseEndsAt     time.Time         `json:"lease_ends_at"`
	RetentionEndsAt *time.Time        `json:"retention_ends_at,omitempty"`
	EndReason       string            `json:"end_reason,omitempty"`
	EndMessage      string            `json:"end_message,omitempty"`
	// CostMicros is what the sandbox has cost so far (its final cost once
	// ended), in USD millionths; Usage says what it used.
	CostMicros int64        `json:"cost_micros"`
	Usage      SandboxUsage `json:"usage"`
	// Node is the node that holds the sandbox, on a many-host
	// installation (absent on a single box).
	Node string `json:"node,omitempty"`
	// Volumes are the volumes it mounts.
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// SandboxUsage is what a sandbox used: time running, CPU consumed, memory
// size times time.
type SandboxUsage struct {
	Seconds          float64 `json:"seconds"`
	CPUSeconds       float64 `json:"cpu_seconds"`
	MemoryGiBSeconds float64 `json:"memory_gib_seconds"`
}

// SandboxList is the body of GET /v1/sandboxes: newest first, one page.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
	// NextPageToken, when set, is the page_token of the next page.
	NextPageToken string `json:"next_page_token,omitempty"`
}

// ExtendRequest is the body of POST /v1/sandboxes/{id}/extend: the lease
// then ends TimeoutSeconds from now, or later if it already did; with
// Exact, TimeoutSeconds from now even if that is sooner.
type ExtendRequest struct {
	TimeoutSeconds int  `json:"timeout_seconds"`
	Exact          bool `json:"exact,omitempty"`
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail carries a stable code and a message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// EgressEvent is one connection or DNS query of a sandbox, allowed or
// refused.
type EgressEvent struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Name    string    `json:"name,omitempty"`
	Address string    `json:"address,omitempty"`
	Port    int       `json:"port,omitempty"`
	Verdict string    `json:"verdict"`
	Reason  string    `json:"reason,omitempty"`
}

// EgressLog is the body of GET /v1/sandboxes/{id}/egress: the newest
// events last.
type EgressLog struct {
	Events []EgressEvent `json:"events"`
}

// SecretInfo is a stored secret as the API shows it: never its value.
type SecretInfo struct {
	Name      string    `json:"name"`
	Host      string    `json:"host"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SetSecretRequest is the body of PUT /v1/secrets/{name}.
type SetSecretRequest struct {
	Value string `json:"value"`
	Host  string `json:"host"`
}

// SecretList is the body of GET /v1/secrets.
type SecretList struct {
	Secrets []SecretInfo `json:"secrets"`
}
