package sandbox

import "time"

// Metric is one sample of a running sandbox's resource use (the API's
// SandboxMetric says what each figure is and who measures it).
type Metric struct {
	Timestamp  time.Time
	CPUCount   int
	CPUUsedPct float64
	MemUsed    int64
	MemTotal   int64
	DiskUsed   int64
	DiskTotal  int64
	NetRx      int64
	NetTx      int64
	// CostNanos is the sandbox's cost so far when the sample was taken:
	// its record's, as the meter keeps it (the ledger's figure, never
	// recomputed here).
	CostNanos int64
}

// MetricsInterval is how often a running sandbox is sampled.
const MetricsInterval = 5 * time.Second
