package template

import "time"

// Build states (Build.State).
const (
	BuildQueued    = "queued"
	BuildRunning   = "running"
	BuildSucceeded = "succeeded"
	BuildFailed    = "failed"
)

// Build is a template build as its account sees it (internal/templates
// runs it; it is kept in memory only).
type Build struct {
	ID string // "bld_" and 16 hex digits
	// Template is the name:tag the build makes.
	Template string
	State    string
	// Steps is the number of steps; Step the one running, or the one that
	// failed (1-based; 0 before the first).
	Steps, Step int
	// Cached counts the steps taken from the cache.
	Cached int
	// Err is why the build failed: a step's failure (kind invalid) or the
	// platform's refusal, as a *sandbox.Error.
	Err error
	// Result is the template made, once succeeded.
	Result    *Template
	CreatedAt time.Time
	StartedAt *time.Time
	EndedAt   *time.Time
}

// Build log event types (BuildEvent.Type).
const (
	LogStep    = "step"    // a step begins: Step, Steps, Message (the step), Cached
	LogStdout  = "stdout"  // a step's output, as it comes
	LogStderr  = "stderr"  //
	LogInfo    = "info"    // what the builder does (its sandbox, the layer made)
	LogEnd     = "end"     // the last event: State, and Err when failed
	LogDropped = "dropped" // Dropped older events are gone (the log is bounded)
)

// BuildEvent is one event of a build's log.
type BuildEvent struct {
	Time    time.Time
	Type    string
	Step    int
	Steps   int
	Cached  bool
	Message string
	State   string
	Err     error
	Dropped int
}

// BuildSize is the size of a build's sandboxes when the caller sets it
// (the API edge cuts a trial account's to the trial's); zero values take
// the spec's vcpus and memory_mib, then the server's defaults.
type BuildSize struct {
	VCPUs, MemoryMiB int
	DiskGiB          *int
}
