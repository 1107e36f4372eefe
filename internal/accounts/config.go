package accounts

import (
	"cmp"
	"fmt"
	"time"

	"github.com/withruntime/withruntime/internal/defaults"
)

// Defaults and bounds of Config.
const (
	// DefaultAccountConcurrency is how many sandboxes an account runs at
	// once unless it says otherwise (the managers' default);
	// MaxAccountConcurrency bounds what an account may say.
	DefaultAccountConcurrency = defaults.Concurrency
	MaxAccountConcurrency     = 10000
	DefaultTrialHours         = 50
	DefaultTrialPerAddress    = 5
	DefaultTrialWindow        = time.Hour
	// DefaultMaxKeysPerAccount bounds the keys an account holds, and those
	// its keys make in a day (keys.go).
	DefaultMaxKeysPerAccount = 100
)

// Defaults of TrialConfig's bounds: the server hands out at most
// DefaultTrialPerWindow trials per window and none while trials hold
// DefaultTrialOutstandingHours unused; each runs at most
// DefaultTrialConcurrency sandboxes and makes at most DefaultTrialMaxKeys
// keys besides its own.
const (
	DefaultTrialPerWindow        = 20
	DefaultTrialOutstandingHours = 1000
	DefaultTrialConcurrency      = 3
	DefaultTrialMaxKeys          = 2
)

// maxTrialHours bounds trial hours, wherever they come from, so that their
// seconds fit an int64 with room to spare.
const maxTrialHours = 1_000_000

// Size is a sandbox's size as a create asks for it.
type Size struct {
	VCPUs, MemoryMiB, DiskGiB int
}

// DefaultSize is the manager's default size, and DefaultTrialSize the
// most a trial account's sandbox may have: the product's snippets
// (`Sandbox.create()` with no size) run on a trial.
var (
	DefaultSize      = Size{VCPUs: defaults.VCPUs, MemoryMiB: defaults.MemoryMiB, DiskGiB: defaults.DiskGiB}
	DefaultTrialSize = DefaultSize
)

// Or is z with its zero fields taken from d.
func (z Size) Or(d Size) Size {
	return Size{VCPUs: cmp.Or(z.VCPUs, d.VCPUs), MemoryMiB: cmp.Or(z.MemoryMiB, d.MemoryMiB), DiskGiB: cmp.Or(z.DiskGiB, d.DiskGiB)}
}

// TrialConfig is the trial offer: each trial account gets Hours of free
// sandbox time, counted in hours of the default size (billing.TrialMs),
// and each client address gets at most PerAddress trial accounts per
// Window; the whole server at most PerWindow, and none while trials made
// in the last 30 days hold OutstandingHours unused. Every trial account
// runs at most Concurrency sandboxes of at most MaxSize, and its keys
// make at most MaxKeys more keys. Zero fields take the defaults
// (WithDefaults).
type TrialConfig struct {
	Enabled          bool
	Hours            float64       // DefaultTrialHours when 0
	PerAddress       int           // DefaultTrialPerAddress when 0
	Window           time.Duration // DefaultTrialWindow when 0
	PerWindow        int           // DefaultTrialPerWindow when 0
	OutstandingHours float64       // DefaultTrialOutstandingHours when 0
	MaxSize          Size          // DefaultTrialSize's fields for zero ones
	Concurrency      int           // DefaultTrialConcurrency when 0
	MaxKeys          int           // DefaultTrialMaxKeys when 0
}

// WithDefaults is t with its zero fields taken from the defaults.
func (t TrialConfig) WithDefaults() TrialConfig {
	t.Hours = cmp.Or(t.Hours, DefaultTrialHours)
	t.PerAddress = cmp.Or(t.PerAddress, DefaultTrialPerAddress)
	t.Window = cmp.Or(t.Window, DefaultTrialWindow)
	t.PerWindow = cmp.Or(t.PerWindow, DefaultTrialPerWindow)
	t.OutstandingHours = cmp.Or(t.OutstandingHours, DefaultTrialOutstandingHours)
	t.MaxSize = t.MaxSize.Or(DefaultTrialSize)
	t.Concurrency = cmp.Or(t.Concurrency, DefaultTrialConcurrency)
	t.MaxKeys = cmp.Or(t.MaxKeys, DefaultTrialMaxKeys)
	return t
}

// Validate reports bounds of t that are wrong, or that would refuse every
// trial offered (outstanding hours below one trial's). Its messages name
// the fields of httpapi.Config, where an operator's settings arrive.
func (t TrialConfig) Validate() error {
	switch {
	case !(t.Hours >= 0 && t.Hours <= maxTrialHours):
		return fmt.Errorf("httpapi: Trial.Hours must be 0 to %d", maxTrialHours)
	case !(t.OutstandingHours >= 0 && t.OutstandingHours <= maxTrialHours*1000):
		return fmt.Errorf("httpapi: Trial.OutstandingHours must be 0 to %d", maxTrialHours*1000)
	case t.PerAddress < 0 || t.Window < 0 || t.PerWindow < 0 || t.Concurrency < 0 || t.MaxKeys < 0 ||
		t.MaxSize.VCPUs < 0 || t.MaxSize.MemoryMiB < 0 || t.MaxSize.DiskGiB < 0:
		return fmt.Errorf("httpapi: the trial's bounds must not be negative")
	case t.Concurrency > MaxAccountConcurrency:
		return fmt.Errorf("httpapi: Trial.Concurrency must be at most %d", MaxAccountConcurrency)
	}
	t = t.WithDefaults()
	if t.Enabled && t.OutstandingHours < t.Hours {
		return fmt.Errorf("httpapi: Trial.OutstandingHours (%g) is below one trial's hours (%g): no trial could be made", t.OutstandingHours, t.Hours)
	}
	return nil
}
