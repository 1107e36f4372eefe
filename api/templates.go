package api

import "time"

// Template is a template as the API shows it: a named, immutable root file
// system and the defaults of the sandboxes made from it.
type Template struct {
	ID string `json:"id"` // "tpl_" and 16 hex digits; stays the same across renames of nothing: a name:tag rebuilt gets a new id
	// Name and Tag: a sandbox names it "name" (tag latest) or "name:tag".
	Name string `json:"name"`
	Tag  string `json:"tag"`
	// Public: the admin published it to every account.
	Public bool `json:"public,omitempty"`
	// Source is how it was made: "snapshot", "oci", "build".
	Source string `json:"source"`
	// Base is the built-in image it is layered on ("default"), or "" for
	// an OCI image's own file system.
	Base string `json:"base,omitempty"`
	// Layers is how many layers it has over its base; SizeBytes what its
	// own layers hold on disk (its base is counted once, not here).
	Layers    int       `json:"layers"`
	SizeBytes int64     `json:"size_bytes"`
	Defaults  Defaults  `json:"defaults"`
	CreatedAt time.Time `json:"created_at"`
	// State is "ready", or "deleting" once removed while sandboxes, pools
	// or paused sandboxes still use it (its storage goes with the last).
	State string `json:"state"`
}

// Defaults are what a sandbox of a template starts with unless its create
// says otherwise.
type Defaults struct {
	Env       map[string]string `json:"env,omitempty"`
	Workdir   string            `json:"workdir,omitempty"`
	User      string            `json:"user,omitempty"`
	VCPUs     int               `json:"vcpus,omitempty"`
	MemoryMiB int               `json:"memory_mib,omitempty"`
	// StartCmd is a shell command every sandbox of the template starts in
	// the background; ReadyCmd a shell command a create waits on (until it
	// exits 0, at most ReadyTimeoutSeconds) before it answers.
	StartCmd            string `json:"start_cmd,omitempty"`
	ReadyCmd            string `json:"ready_cmd,omitempty"`
	ReadyTimeoutSeconds int    `json:"ready_timeout_seconds,omitempty"`
}

// TemplateList is the body of GET /v1/templates: the account's templates
// and the public ones, by name and tag.
type TemplateList struct {
	Templates []Template `json:"templates"`
}

// SnapshotRequest is the body of POST /v1/sandboxes/{id}/snapshot: the
// sandbox's file system as it is now becomes template Template
// ("name[:tag]"); the sandbox keeps running.
type SnapshotRequest struct {
	Template string `json:"template"`
}
