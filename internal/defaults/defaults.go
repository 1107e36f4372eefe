// Package defaults holds the settings' defaults that more than one package
// applies, each written once: the manager fills its zero configuration
// from them, the control plane of a many-host installation places by the
// same sizes, the account rules and billing count by them, and the flags
// of serve and node (server.Config.RegisterFlags) show them. A default
// that only its own package applies stays an exported constant there
// (egress.DefaultIdleTimeout, admission.DefaultMaxConns, the trial's in
// accounts), which the flag reads.
//
// It imports nothing of this module but the domain, so that every package
// may import it.
package defaults

import (
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// The size a create that names none gets, which placement assumes for it
// and the trial's hours are counted in.
const (
	VCPUs     = 2
	MemoryMiB = 4096
	DiskMiB   = 10 << 10
	// DiskGiB is DiskMiB in GiB, the unit of the API's disk_gib.
	DiskGiB = DiskMiB >> 10
)

// Concurrency is how many sandboxes an account runs at once unless its own
// setting says otherwise: the managers admit by it, and the API shows it.
const Concurrency = 100

// Admission's bounds: Overcommit is how many times the host's CPUs, memory
// and free disk admission may hand out; of that, trial accounts together
// hold at most TrialHostShare, and one account at most AccountHostShare
// (1: no bound of its own).
const (
	Overcommit       = 4.0
	TrialHostShare   = 0.5
	AccountHostShare = 1.0
)

// Lease is the lease of a sandbox created without a timeout, MaxLease the
// longest a sandbox may ask for, Retention how long a paused sandbox is
// kept, and PoolMaxAge how long a warm sandbox waits unclaimed before it
// is replaced.
const (
	Lease      = 300 * time.Second
	MaxLease   = 24 * time.Hour
	Retention  = 7 * 24 * time.Hour
	PoolMaxAge = 30 * time.Minute
)

// Isolation is the isolation every server runs (its backend registers as
// Required): a node registered before nodes named their isolations runs it
// only.
const Isolation = sandbox.IsolationGVisor
