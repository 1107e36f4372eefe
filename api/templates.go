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

// Build states (TemplateBuild.State).
const (
	BuildQueued    = "queued"
	BuildRunning   = "running"
	BuildSucceeded = "succeeded"
	BuildFailed    = "failed"
)

// BuildSpecEntry is the name of the first entry of a build sent as
// application/x-tar: the build specification (the JSON body of the other
// form); the entries after it are the build context, the files copy steps
// take.
const BuildSpecEntry = "withruntime-build.json"

// TemplateBuild is a template build: POST /v1/templates answers it (202,
// state queued), GET /v1/templates/builds/{id} shows where it is. A build
// is the account's own, and kept in the server's memory only: a restart
// fails the builds in flight (no template is made of them) and forgets
// them.
type TemplateBuild struct {
	ID string `json:"id"` // "bld_" and 16 hex digits
	// Template is the name:tag the build makes.
	Template string `json:"template"`
	// State is queued, running, succeeded or failed.
	State string `json:"state"`
	// Steps is how many steps the build has; Step the one running, or the
	// one that failed (1-based; 0 before the first); CachedSteps how many
	// were taken from the cache without running.
	Steps       int `json:"steps"`
	Step        int `json:"step"`
	CachedSteps int `json:"cached_steps"`
	// Error is why a failed build failed: invalid_request for a step
	// that failed (its message names the step and its exit code), or the
	// platform's refusal (e.g. concurrency_limit_reached).
	Error *ErrorDetail `json:"error,omitempty"`
	// Result is the template made, once succeeded.
	Result    *Template  `json:"result,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

// Build log event types (BuildLogEvent.Type).
const (
	BuildLogStep    = "step"    // a step begins: step, steps, message (the step), cached
	BuildLogStdout  = "stdout"  // a step's output, as it comes
	BuildLogStderr  = "stderr"  //
	BuildLogInfo    = "info"    // what the builder does (its sandbox, the layer made)
	BuildLogEnd     = "end"     // the last event: state, and error when failed
	BuildLogDropped = "dropped" // dropped older events are gone (the log is bounded)
)

// BuildLogEvent is one line of GET /v1/templates/builds/{id}/logs
// (application/x-ndjson).
type BuildLogEvent struct {
	Time    time.Time    `json:"time"`
	Type    string       `json:"type"`
	Step    int          `json:"step,omitempty"`
	Steps   int          `json:"steps,omitempty"`
	Cached  bool         `json:"cached,omitempty"`
	Message string       `json:"message,omitempty"`
	State   string       `json:"state,omitempty"`
	Error   *ErrorDetail `json:"error,omitempty"`
	Dropped int          `json:"dropped,omitempty"`
}

// PublishRequest is the body of POST /v1/templates/{name}/publish (admin
// key only): Public true shows the admin account's template to every
// account (their own template of the same name goes first), false takes
// that back.
type PublishRequest struct {
	Public bool `json:"public"`
}
