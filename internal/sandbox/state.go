package sandbox

// State is where a sandbox is in its life. The names are part of the wire
// contract and must not change.
type State string

const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	StatePaused   State = "paused"
	StateEnded    State = "ended"
)

// EndReason says why a sandbox ended. The names are part of the wire
// contract and must not change.
type EndReason string

const (
	EndStopped        EndReason = "stopped"
	EndLeaseEnded     EndReason = "lease_ended"
	EndOutOfMemory    EndReason = "out_of_memory"
	EndSpendingLimit  EndReason = "spending_limit"
	EndRetentionEnded EndReason = "retention_ended"
	EndHostRestart    EndReason = "host_restart"
	// EndNodeLost: the node the sandbox ran on stopped renewing its lease
	// (many-host installations); it is billed to the node's last report.
	EndNodeLost EndReason = "node_lost"
	EndError    EndReason = "error"
)

// LeaseEndAction is what happens when a lease runs out.
type LeaseEndAction string

const (
	OnLeaseEndStop  LeaseEndAction = "stop"
	OnLeaseEndPause LeaseEndAction = "pause"
)
