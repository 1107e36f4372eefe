package billing

// A trial's free hours are hours of the default sandbox (2 vCPUs, 4 GiB),
// not of any sandbox: what a ledger row used counts as memory held at
// TrialMemoryMiB per hour, or as CPU consumed at TrialCPUs busy per hour,
// whichever is more. A default-size sandbox uses one trial hour an hour
// (its two CPUs busy or not), a 1 GiB idle one a quarter, a 512 MiB one
// with both CPUs busy a whole one, and a 16 GiB one four.
const (
	TrialMemoryMiB = 4096
	TrialCPUs      = 2
)

// TrialMs is the trial time, in milliseconds of the default sandbox, that
// a ledger row of memoryMiBMs (memory size times time) and cpuNs (CPU
// consumed) uses, rounded up.
func TrialMs(memoryMiBMs, cpuNs int64) int64 {
	mem := ceilDiv(max(memoryMiBMs, 0), TrialMemoryMiB)
	cpu := ceilDiv(max(cpuNs, 0), TrialCPUs*1_000_000)
	return max(mem, cpu)
}

func ceilDiv(a, b int64) int64 {
	return a/b + min(a%b, 1)
}
