package manager

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/defaults"
	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/storagequota"
	"github.com/withruntime/withruntime/internal/store"
)

// Config is the manager's configuration. Zero values take the defaults.
type Config struct {
	Backend sandbox.Backend
	Store   Store
	Logger  *slog.Logger
	// Templates resolves the templates creates name (nil: the built-in
	// image is the only one).
	Templates Templates

	// Node is the id of the node this manager runs on, in a store many
	// nodes share ("" on a single box). Its records carry it, and its
	// passes (recovery, reaper, meter, limits) act on those records only.
	Node string
	// NodeCompat is what a checkpoint this node saves needs to be restored
	// (the runsc build and the CPU features, store.Node.Compat).
	NodeCompat string
	// SharedCheckpoints says the backend keeps paused sandboxes'
	// checkpoints in storage every node shares
	// (sandbox.BackendConfig.SharedCheckpoints): a paused sandbox of
	// another node with a compatible checkpoint may be resumed here.
	SharedCheckpoints bool

	DefaultVCPUs     int
	DefaultMemoryMiB int
	MinVCPUs         int
	MaxVCPUs         int
	MinMemoryMiB     int
	MaxMemoryMiB     int
	DiskMiB          int
	MaxDiskGiB       int // disk_gib's limit; DiskMiB is the default
	PidsLimit        int
	DefaultTimeout   time.Duration
	MaxTimeout       time.Duration
	Retention        time.Duration
	ReapInterval     time.Duration

	// HostCPUs and HostMemoryMiB are what admission may hand out before
	// the overcommit ratio; default the machine's.
	HostCPUs      int
	HostMemoryMiB int
	// Overcommit is how many times the host's CPUs, memory and free disk
	// admission may hand out.
	Overcommit float64
	// TrialHostShare is the fraction of what admission hands out (vCPUs,
	// memory and disk quotas, each) that the sandboxes of trial accounts
	// may hold together (default defaults.TrialHostShare), and
	// AccountHostShare the fraction that one account's may hold (default
	// 1: no bound of its own). AdminAccount, the account of the server's
	// admin key, is not held to AccountHostShare.
	TrialHostShare   float64
	AccountHostShare float64
	AdminAccount     string

	// DataDir is where sandboxes' disks live: the live sandboxes' disk
	// quotas must fit its file system's free space times Overcommit.
	DataDir string
	// DiskFree returns that free space in bytes (default: statfs of
	// DataDir; with neither, disk is not admitted). Tests set it.
	DiskFree func() (int64, error)

	// Now is the clock (default time.Now). Tests set it.
	Now func() time.Time

	// Prices is the price table (nil: billing.Default).
	Prices *billing.Prices
	// MeterInterval is how often live sandboxes are metered and limits
	// checked.
	MeterInterval time.Duration
	// Observer hears what the server's metrics count (census.go); nil:
	// nobody.
	Observer Observer
	// StatsInterval is how often running sandboxes' metrics are sampled
	// (sandbox.MetricsInterval when 0).
	StatsInterval time.Duration
	// DefaultConcurrency is how many sandboxes an account runs at once
	// unless its own setting says otherwise.
	DefaultConcurrency int

	// Pools are the warm pools: started sandboxes kept ready per size,
	// which a create of that size takes instead of booting one. None when
	// empty.
	Pools []Pool
	// PoolMaxAge is how long a warm sandbox waits before it is replaced
	// (default defaults.PoolMaxAge).
	PoolMaxAge time.Duration

	// Egress says whether the host's egress services run, so that
	// sandboxes may have network access.
	Egress bool
	// EgressState is what the egress services keep per sandbox: its log,
	// and what to release when it ends.
	EgressState interface {
		Events(id string) []egress.Event
		Release(id string)
	}

	// Snapshots keeps the snapshots' records (nil: snapshots and forks
	// are not offered). SnapshotDir holds their files on this node
	// (default DataDir/snapshots), SnapshotRetention is how long one is
	// kept (default defaults.Retention), and StorageQuota is the
	// accounts' storage quota a snapshot must fit in, with everything
	// that counts there (snapshots, volumes; nil: no bound).
	Snapshots         store.Snapshots
	SnapshotDir       string
	SnapshotRetention time.Duration
	StorageQuota      *storagequota.Quota

	// MaxConcurrentBoots bounds the boots (starts and resumes, pool
	// members' included) under way at once; a boot past it waits its turn
	// as long as its caller does (default DefaultMaxConcurrentBoots).
	MaxConcurrentBoots int
	// TracerProvider gets the spans of the lifecycle operations and of
	// the backend's calls (default: none are made).
	TracerProvider trace.TracerProvider
}

func (c *Config) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.DefaultVCPUs, defaults.VCPUs)
	def(&c.DefaultMemoryMiB, defaults.MemoryMiB)
	def(&c.MinVCPUs, 1)
	def(&c.MaxVCPUs, 8)
	def(&c.MinMemoryMiB, 512)
	def(&c.MaxMemoryMiB, 16384)
	def(&c.DiskMiB, defaults.DiskMiB)
	def(&c.MaxDiskGiB, 100)
	def(&c.PidsLimit, 4096)
	def(&c.HostCPUs, runtime.NumCPU())
	def(&c.HostMemoryMiB, HostMemoryMiB())
	if c.DefaultTimeout == 0 {
		c.DefaultTimeout = defaults.Lease
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = defaults.MaxLease
	}
	if c.Retention == 0 {
		c.Retention = defaults.Retention
	}
	if c.SnapshotRetention == 0 {
		c.SnapshotRetention = defaults.Retention
	}
	if c.SnapshotDir == "" && c.DataDir != "" {
		c.SnapshotDir = filepath.Join(c.DataDir, "snapshots")
	}
	if c.ReapInterval == 0 {
		c.ReapInterval = time.Second
	}
	if c.Overcommit == 0 {
		c.Overcommit = defaults.Overcommit
	}
	if c.TrialHostShare == 0 {
		c.TrialHostShare = defaults.TrialHostShare
	}
	if c.AccountHostShare == 0 {
		c.AccountHostShare = defaults.AccountHostShare
	}
	if c.Prices == nil {
		p := billing.Default
		c.Prices = &p
	}
	if c.StatsInterval == 0 {
		c.StatsInterval = sandbox.MetricsInterval
	}
	if c.MeterInterval == 0 {
		c.MeterInterval = time.Second
	}
	if c.PoolMaxAge == 0 {
		c.PoolMaxAge = defaults.PoolMaxAge
	}
	def(&c.DefaultConcurrency, defaults.Concurrency)
	def(&c.MaxConcurrentBoots, DefaultMaxConcurrentBoots())
	if c.TracerProvider == nil {
		c.TracerProvider = noop.NewTracerProvider()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.DiskFree == nil && c.DataDir != "" {
		dir := c.DataDir
		c.DiskFree = func() (int64, error) { return statfsFree(dir) }
	}
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Backend == nil:
		return errors.New("manager needs a backend")
	case c.Store == nil:
		return errors.New("manager needs a store")
	case c.MinVCPUs > c.MaxVCPUs || c.MinMemoryMiB > c.MaxMemoryMiB:
		return errors.New("size limits: minimum above maximum")
	case c.DefaultVCPUs < c.MinVCPUs || c.DefaultVCPUs > c.MaxVCPUs:
		return errors.New("default vcpus outside the limits")
	case c.DefaultMemoryMiB < c.MinMemoryMiB || c.DefaultMemoryMiB > c.MaxMemoryMiB:
		return errors.New("default memory outside the limits")
	case c.DiskMiB > c.MaxDiskGiB<<10:
		return errors.New("default disk outside the limits")
	case c.Overcommit <= 0:
		return errors.New("overcommit ratio must be positive")
	case !(c.TrialHostShare > 0 && c.TrialHostShare <= 1):
		return errors.New("the trial accounts' share of the host must be above 0 and at most 1")
	case !(c.AccountHostShare > 0 && c.AccountHostShare <= 1):
		return errors.New("an account's share of the host must be above 0 and at most 1")
	case c.DefaultConcurrency < 1:
		return errors.New("default concurrency must be at least 1")
	case c.MaxConcurrentBoots < 1:
		return errors.New("concurrent boots must be at least 1")
	case c.SharedCheckpoints && c.NodeCompat == "":
		return errors.New("shared checkpoints need the node's compat string")
	}
	if err := c.Prices.Validate(); err != nil {
		return err
	}
	seen := map[poolKey]bool{}
	for _, p := range c.Pools {
		switch {
		case p.VCPUs < c.MinVCPUs || p.VCPUs > c.MaxVCPUs || p.MemoryMiB < c.MinMemoryMiB || p.MemoryMiB > c.MaxMemoryMiB:
			return fmt.Errorf("pool %s: size outside the limits (%d-%d vCPUs, %d-%d MiB)", p, c.MinVCPUs, c.MaxVCPUs, c.MinMemoryMiB, c.MaxMemoryMiB)
		case p.Size < 0:
			return fmt.Errorf("pool %s: negative size", p)
		case seen[p.key()]:
			return fmt.Errorf("pool %s: that size has a pool already", p)
		}
		seen[p.key()] = true
	}
	return nil
}
