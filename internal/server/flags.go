package server

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/internal/defaults"
	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// RegisterFlags registers on fs the flags of the settings serve and node
// share, which fill c: the cache, the manager's limits and prices, the
// isolation and the backends' own options, the egress services, the
// warm pools and the metrics listener. Each flag's default is the one the packages apply to a zero
// setting (package defaults, or the package's own constant), so that a
// server started in-process with a zero Config and one started by the
// command agree. The commands register what only they have (listen,
// data-dir, store...) themselves.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.CacheDir, "cache-dir", DefaultCacheDir, "the `DIR` of built images and runsc, shared by every data dir")
	c.managerFlags(fs)
	c.isolationFlags(fs)
	c.egressFlags(fs)
	poolFlags(fs, &c.Manager)
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "serve Prometheus metrics at GET /metrics on `ADDRESS` (off by default; keep it off the public network: it tells how busy the host is)")
}

// managerFlags registers the flags of the manager's limits and prices.
func (c *Config) managerFlags(fs *pflag.FlagSet) {
	fs.Float64Var(&c.Manager.Overcommit, "overcommit", defaults.Overcommit, "how many times the host's CPUs, memory and free disk admission may hand out")
	fs.Float64Var(&c.Manager.TrialHostShare, "trial-host-share", defaults.TrialHostShare, "the fraction of what admission hands out (vCPUs, memory and disk, each) that trial accounts' sandboxes may hold together; past it a trial's create gets 503 capacity_exhausted while other accounts still create")
	fs.Float64Var(&c.Manager.AccountHostShare, "account-host-share", defaults.AccountHostShare, "the fraction of what admission hands out (vCPUs, memory and disk, each) that one account's sandboxes may hold, past it 503 capacity_exhausted; the admin key's account is not bound (1: no account is, so a single user fills their own machine)")
	fs.DurationVar(&c.Manager.MaxTimeout, "max-lease", defaults.MaxLease, "longest lease a sandbox may ask for")
	fs.DurationVar(&c.Manager.Retention, "retention", defaults.Retention, "how long a paused sandbox is kept")
	fs.IntVar(&c.Manager.DefaultConcurrency, "concurrency", defaults.Concurrency, "how many sandboxes an account runs at once unless its own setting says otherwise")
	fs.IntVar(&c.Manager.MaxConcurrentBoots, "max-concurrent-boots", 0, "how many sandboxes may boot (start, resume, or fill a warm pool) at once on this host; more wait their turn (0: two per CPU)")
	fs.StringVar(&c.PricesFile, "prices", "", "a JSON price table `FILE` (memory_nanos_per_gib_hour, cpu_nanos_per_cpu_hour, storage_nanos_per_gib_hour; USD billionths) instead of the default")
}

// isolationFlags registers the flags of the sandboxes' isolation:
// --isolation, whose choices are auto and every registered backend, and
// each backend's own options (sandbox.Option).
func (c *Config) isolationFlags(fs *pflag.FlagSet) {
	c.Isolation = IsolationAuto
	fs.Var(&choice{&c.Isolation, append([]string{IsolationAuto}, sandbox.Backends()...)}, "isolation",
		"the isolation of a sandbox created without one: `auto|gvisor|microvm` (auto: microvm when KVM boots a guest on this host, else gvisor)")
	c.BackendOptions = map[string]string{}
	for _, o := range sandbox.Options() {
		c.BackendOptions[o.Flag] = o.Default
		fs.Var(&optionFlag{c.BackendOptions, o}, o.Flag, o.Usage)
	}
}

// egressFlags registers the flags of the egress services.
func (c *Config) egressFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.EgressHosts, "egress-hosts", "", "a hosts `FILE` (ADDRESS NAME... lines) the sandboxes' resolver answers from before the host's")
	fs.StringVar(&c.EgressCA, "egress-ca", "", "PEM `FILE` of extra roots trusted when the egress proxy verifies upstream TLS")
	fs.Func("sandbox-ca", "a PEM `FILE` of certificates every sandbox trusts besides the image's roots (repeatable): the root of a TLS-inspecting proxy, a company's authority; it joins /etc/ssl/certs/ca-certificates.crt, which every sandbox mounts read-only", func(v string) error {
		// Checked here, so that a bad file stops serve before anything
		// starts; the server reads it again when it writes the bundle.
		if _, err := egress.ReadSandboxCA(v); err != nil {
			return err
		}
		c.SandboxCA = append(c.SandboxCA, v)
		return nil
	})
	fs.BoolVar(&c.NoEgress, "no-egress", false, "run sandboxes without any network: no packet rules, no proxy")
	fs.Func("egress-permit", "a `CIDR` sandboxes may reach although the blocklist refuses it (repeatable): 198.18.0.0/15 for test upstreams, internal services; never the host's own addresses", func(v string) error {
		p, err := egress.ParsePermit(v)
		if err != nil {
			return err
		}
		c.EgressPermit = append(c.EgressPermit, p)
		return nil
	})
	fs.IntVar(&c.EgressMaxConns, "egress-max-conns", egress.DefaultMaxConns, "proxied connections one sandbox may hold open at once; more are refused and logged")
	fs.IntVar(&c.EgressMaxConnsAccount, "egress-max-conns-account", 0, "proxied connections all the sandboxes of one account may hold open at once; more are refused and logged (0: 4 × --egress-max-conns)")
	fs.DurationVar(&c.EgressIdleTimeout, "egress-idle-timeout", egress.DefaultIdleTimeout, "close a proxied connection on which nothing moved either way for this long")
	fs.IntVar(&c.EgressDNSRate, "egress-dns-rate", egress.DefaultDNSQueriesPerSecond, "DNS queries per second one sandbox may make; more are refused and logged")
}

// poolFlags registers --pool and --pool-max-age, which fill to's Pools
// and PoolMaxAge. Until a --pool is given to holds DefaultPools; the
// first one replaces them, and "none" leaves no pool. Every mistake is an
// error of the flag, so a usage error (exit 2) naming the value.
func poolFlags(fs *pflag.FlagSet, to *manager.Config) {
	to.Pools = DefaultPools()
	var given, none bool
	fs.Func("pool", fmt.Sprintf("a warm pool `[TEMPLATE:]SIZE=N`: N started sandboxes of SIZE (VCPUSxMEMORY_MIB) kept ready for the creates of that size, e.g. 2x4096=8, of the default image or of a template the admin account holds or sees published, e.g. myteam/app:2x4096=4 (repeatable; given pools replace the default %s; none: no pool)", poolList(DefaultPools())), func(v string) error {
		if !given {
			to.Pools, given = nil, true
		}
		if v == "none" {
			if len(to.Pools) > 0 {
				return errors.New("none cannot be combined with pool sizes")
			}
			none = true
			return nil
		}
		if none {
			return fmt.Errorf("%s cannot be combined with none", v)
		}
		p, err := manager.ParsePool(v)
		if err != nil {
			return err
		}
		for _, q := range to.Pools {
			if q.Template == p.Template && q.VCPUs == p.VCPUs && q.MemoryMiB == p.MemoryMiB {
				return fmt.Errorf("pool %q: size %dx%d has a pool already (%s)", v, p.VCPUs, p.MemoryMiB, q)
			}
		}
		to.Pools = append(to.Pools, p)
		return nil
	})
	to.PoolMaxAge = defaults.PoolMaxAge
	fs.Var((*positiveDuration)(&to.PoolMaxAge), "pool-max-age", "replace a warm sandbox that has waited this long unclaimed")
}

func poolList(ps []manager.Pool) string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += " "
		}
		s += p.String()
	}
	return s
}

// positiveDuration is a duration flag that refuses 0 and negatives: a zero
// max age would mean the manager's default, not "never" or "at once".
type positiveDuration time.Duration

func (d *positiveDuration) String() string { return time.Duration(*d).String() }
func (d *positiveDuration) Type() string   { return "duration" }

func (d *positiveDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration, like 30m", s)
	}
	if v <= 0 {
		return fmt.Errorf("%q: must be positive", s)
	}
	*d = positiveDuration(v)
	return nil
}

// choice is a string flag that takes one of a few values.
type choice struct {
	p       *string
	allowed []string
}

func (c *choice) String() string { return *c.p }
func (c *choice) Type() string   { return "string" }

func (c *choice) Set(v string) error {
	if !slices.Contains(c.allowed, v) {
		return fmt.Errorf("want %s", strings.Join(c.allowed, ", "))
	}
	*c.p = v
	return nil
}

// optionFlag is the flag of a backend's option: its value is kept in the
// map of every backend's options.
type optionFlag struct {
	values map[string]string
	opt    sandbox.Option
}

func (f *optionFlag) String() string { return f.values[f.opt.Flag] }
func (f *optionFlag) Type() string   { return "string" }

func (f *optionFlag) Set(v string) error {
	if len(f.opt.Choices) > 0 && !slices.Contains(f.opt.Choices, v) {
		return fmt.Errorf("want %s", strings.Join(f.opt.Choices, ", "))
	}
	f.values[f.opt.Flag] = v
	return nil
}
