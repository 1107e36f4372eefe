package server

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/internal/defaults"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// The isolation package defaults names (what a node that lists none runs,
// to the control plane) is the backend every server runs.
func TestRequiredIsolationIsTheDefault(t *testing.T) {
	var required []string
	for _, r := range sandbox.Registrations() {
		if r.Required {
			required = append(required, r.Name)
		}
	}
	if len(required) != 1 || required[0] != defaults.Isolation {
		t.Errorf("required backends %v, want exactly defaults.Isolation (%s)", required, defaults.Isolation)
	}
}

// With no flag given, RegisterFlags leaves the values the manager would
// fill a zero configuration with, so that serve and an in-process server
// agree; a flag given replaces its value.
func TestRegisterFlagsDefaults(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	m := c.Manager
	switch {
	case c.CacheDir != DefaultCacheDir || c.Isolation != IsolationAuto:
		t.Errorf("got cache dir %q isolation %q, want %q and %q", c.CacheDir, c.Isolation, DefaultCacheDir, IsolationAuto)
	case m.Overcommit != defaults.Overcommit || m.TrialHostShare != defaults.TrialHostShare || m.AccountHostShare != defaults.AccountHostShare:
		t.Errorf("got overcommit %g shares %g %g, want package defaults'", m.Overcommit, m.TrialHostShare, m.AccountHostShare)
	case m.MaxTimeout != defaults.MaxLease || m.Retention != defaults.Retention || m.PoolMaxAge != defaults.PoolMaxAge:
		t.Errorf("got max lease %v retention %v pool max age %v, want package defaults'", m.MaxTimeout, m.Retention, m.PoolMaxAge)
	case m.DefaultConcurrency != defaults.Concurrency:
		t.Errorf("got concurrency %d, want %d", m.DefaultConcurrency, defaults.Concurrency)
	case len(m.Pools) != 1 || m.Pools[0].VCPUs != defaults.VCPUs || m.Pools[0].MemoryMiB != defaults.MemoryMiB:
		t.Errorf("got pools %v, want one of the default size", m.Pools)
	}
	if err := fs.Parse([]string{"--overcommit", "2", "--concurrency", "7", "--pool", "none"}); err != nil {
		t.Fatal(err)
	}
	if c.Manager.Overcommit != 2 || c.Manager.DefaultConcurrency != 7 || len(c.Manager.Pools) != 0 {
		t.Errorf("after flags: got overcommit %g concurrency %d pools %v, want 2, 7 and none", c.Manager.Overcommit, c.Manager.DefaultConcurrency, c.Manager.Pools)
	}
}
