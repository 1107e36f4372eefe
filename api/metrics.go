package api

import "time"

// SandboxMetric is one sample of a sandbox's resource use
// (GET /v1/sandboxes/{id}/metrics), taken every 5 seconds while it
// runs. CPU is what the host measured of the sandbox where the backend
// meters it; memory, disk and network are what the sandbox's own kernel
// reports (its agent reads them inside, so root there could misreport
// its own figures: they are for watching, never for billing). CostMicros
// is the other way round: the sandbox's cost so far at the sample's time,
// as its record and the usage ledger count it (USD millionths).
type SandboxMetric struct {
	Timestamp  time.Time `json:"timestamp"`
	CPUCount   int       `json:"cpu_count"`
	CPUUsedPct float64   `json:"cpu_used_pct"`
	MemUsed    int64     `json:"mem_used_bytes"`
	MemTotal   int64     `json:"mem_total_bytes"`
	DiskUsed   int64     `json:"disk_used_bytes"`
	DiskTotal  int64     `json:"disk_total_bytes"`
	NetRx      int64     `json:"net_rx_bytes"`
	NetTx      int64     `json:"net_tx_bytes"`
	CostMicros int64     `json:"cost_micros"`
}

// SandboxMetrics is GET /v1/sandboxes/{id}/metrics's answer, oldest first.
type SandboxMetrics struct {
	Metrics []SandboxMetric `json:"metrics"`
}

// AgentStats is what the agent reads of its sandbox (GET /stats): the
// cumulative CPU time of every CPU, and the rest as SandboxMetric has it.
type AgentStats struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUCount   int     `json:"cpu_count"`
	MemUsed    int64   `json:"mem_used_bytes"`
	MemTotal   int64   `json:"mem_total_bytes"`
	DiskUsed   int64   `json:"disk_used_bytes"`
	DiskTotal  int64   `json:"disk_total_bytes"`
	NetRx      int64   `json:"net_rx_bytes"`
	NetTx      int64   `json:"net_tx_bytes"`
}
