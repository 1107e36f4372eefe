package billing

import (
	"errors"
	"math/big"
	"time"
)

// Prices is the price table. Memory is billed at the sandbox's size for as
// long as it runs; CPU only for the time it actually consumed; a paused
// sandbox only for storage, by its memory size.
type Prices struct {
	MemoryNanosPerGiBHour  int64 `json:"memory_nanos_per_gib_hour"`
	CPUNanosPerCPUHour     int64 `json:"cpu_nanos_per_cpu_hour"`
	StorageNanosPerGiBHour int64 `json:"storage_nanos_per_gib_hour"`
}

// Default reproduces the product's headline rates: a 2 vCPU, 4 GiB sandbox
// costs $0.03125 an hour idle (4 GiB of memory) and $0.08 an hour with both
// CPUs busy (plus 2 CPU-hours of $0.024375 each). Paused sandboxes cost
// nothing.
var Default = Prices{
	MemoryNanosPerGiBHour:  7_812_500,
	CPUNanosPerCPUHour:     24_375_000,
	StorageNanosPerGiBHour: 0,
}

// Validate refuses negative prices.
func (p Prices) Validate() error {
	if p.MemoryNanosPerGiBHour < 0 || p.CPUNanosPerCPUHour < 0 || p.StorageNanosPerGiBHour < 0 {
		return errors.New("prices must not be negative")
	}
	return nil
}

const (
	mibPerGiB   = 1024
	msPerHour   = 3_600_000
	nsPerHour   = 3_600_000_000_000
	NanosPerUSD = 1_000_000_000
)

// mulDiv is a*b/c, rounded to nearest, without overflow.
func mulDiv(a, b, c int64) int64 {
	if c == 0 {
		return 0
	}
	x := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	x.Add(x, big.NewInt(c/2))
	return x.Quo(x, big.NewInt(c)).Int64()
}

// Running is the cost of running: memoryMiBMs of memory size times time,
// and cpuNs of CPU consumed.
func (p Prices) Running(memoryMiBMs, cpuNs int64) int64 {
	return mulDiv(memoryMiBMs, p.MemoryNanosPerGiBHour, mibPerGiB*msPerHour) +
		mulDiv(cpuNs, p.CPUNanosPerCPUHour, nsPerHour)
}

// Paused is the cost of keeping a paused sandbox of memoryMiB for pausedMs.
func (p Prices) Paused(memoryMiB int, pausedMs int64) int64 {
	return mulDiv(int64(memoryMiB)*pausedMs, p.StorageNanosPerGiBHour, mibPerGiB*msPerHour)
}

// Stored is the cost of keeping bytes of storage (a snapshot) for ms, at
// the storage price, counted by the MiB begun.
func (p Prices) Stored(bytes, ms int64) int64 {
	mib := (bytes + 1<<20 - 1) >> 20
	return mulDiv(mib*ms, p.StorageNanosPerGiBHour, mibPerGiB*msPerHour)
}

// MaxLease is the most a lease of d can cost a sandbox of this size: every
// CPU busy the whole time.
func (p Prices) MaxLease(vcpus, memoryMiB int, d time.Duration) int64 {
	ms := d.Milliseconds()
	return p.Running(int64(memoryMiB)*ms, int64(vcpus)*d.Nanoseconds())
}

// Micros shows nanos as USD millionths, rounded up: what is shown never
// undercounts what is kept.
func Micros(nanos int64) int64 {
	return (nanos + 999) / 1000
}
