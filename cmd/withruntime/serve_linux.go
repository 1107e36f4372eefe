package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/internal/accounts"
	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/cluster"
	"github.com/withruntime/withruntime/internal/defaults"
	"github.com/withruntime/withruntime/internal/membudget"
	"github.com/withruntime/withruntime/internal/server"
	"github.com/withruntime/withruntime/internal/setup"
	"github.com/withruntime/withruntime/internal/storagequota"
	"github.com/withruntime/withruntime/internal/templates"
	"github.com/withruntime/withruntime/internal/volume"
)

// serve is `withruntime serve`: it registers the flags (SPEC.md names
// them) and returns what runs the server.
func serve(fs *pflag.FlagSet) func(args []string) int { return serveWith(fs, startAndWait) }

// serveWith is serve with what runs the server given, so that tests see
// the configuration the flags make without starting one.
func serveWith(fs *pflag.FlagSet, run func(context.Context, server.Config) error) func(args []string) int {
	var cfg server.Config
	fs.StringVar(&cfg.Listen, "listen", server.DefaultListen, "the `ADDRESS` to serve the API on")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "the `DIR` for the database, admin.key and per-sandbox state (required)")
	// The settings serve shares with node: cache-dir, the manager's
	// limits, the isolation, egress and the pools.
	cfg.RegisterFlags(fs)
	fs.StringVar(&cfg.SDKDir, "sdk-dir", "", "the `DIR` of the SDK packages served without a key at /sdk/ (default CACHE_DIR/sdk, which setup fills)")
	fs.IntVar(&cfg.MaxConns, "max-conns", admission.DefaultMaxConns, "how many API client connections may be open at once (the longest-waiting one without a request in progress makes room for a new one)")
	fs.IntVar(&cfg.AgentMemoryMiB, "agent-memory-budget", membudget.DefaultTotal>>20, "`MIB` of memory the server may hold of sandboxes' answers in progress, all together; an account gets a quarter, a sandbox an eighth, and requests past them get 429 rate_limited (past the total 503 capacity_exhausted)")
	fs.BoolVar(&cfg.Trial.Enabled, "allow-trial", false, "let clients obtain trial accounts (POST /v1/trial, rate-limited per client address)")
	fs.Float64Var(&cfg.Trial.Hours, "trial-hours", accounts.DefaultTrialHours, fmt.Sprintf("free sandbox hours of each trial account, in hours of the default size (%d vCPUs, %d GiB): a larger sandbox, or one with more than two CPUs busy, uses them faster, a smaller idle one slower", billing.TrialCPUs, billing.TrialMemoryMiB>>10))
	fs.IntVar(&cfg.Trial.PerAddress, "trial-per-address", accounts.DefaultTrialPerAddress, "trial accounts one client address may obtain per hour")
	fs.IntVar(&cfg.Trial.PerWindow, "trial-per-hour", accounts.DefaultTrialPerWindow, "trial accounts the whole server hands out per hour, every address together (past it 429 rate_limited)")
	fs.Float64Var(&cfg.Trial.OutstandingHours, "trial-outstanding-hours", accounts.DefaultTrialOutstandingHours, "no new trial account while those made in the last 30 days hold this many of their hours unused (503 capacity_exhausted)")
	fs.IntVar(&cfg.Trial.MaxSize.VCPUs, "trial-max-vcpus", accounts.DefaultTrialSize.VCPUs, "vCPUs a trial account's sandbox may have at most (403 forbidden past it; a create without a size gets the default cut to it)")
	fs.IntVar(&cfg.Trial.MaxSize.MemoryMiB, "trial-max-memory", accounts.DefaultTrialSize.MemoryMiB, "`MIB` of memory a trial account's sandbox may have at most")
	fs.IntVar(&cfg.Trial.MaxSize.DiskGiB, "trial-max-disk", accounts.DefaultTrialSize.DiskGiB, "`GIB` of disk a trial account's sandbox may have at most")
	fs.IntVar(&cfg.Trial.Concurrency, "trial-concurrency", accounts.DefaultTrialConcurrency, "how many sandboxes a trial account runs at once")
	fs.IntVar(&cfg.Trial.MaxKeys, "trial-max-keys", accounts.DefaultTrialMaxKeys, "keys a trial account's keys may make, removed ones counted (403 forbidden past it)")
	fs.IntVar(&cfg.MaxKeysPerAccount, "max-keys-per-account", accounts.DefaultMaxKeysPerAccount, "keys an account may hold (409 conflict past it), and keys its keys may make in 24 hours, removed ones counted (429 rate_limited); the admin key is bound by neither")
	fs.IntVar(&cfg.MaxVolumeGiB, "max-volume-gib", volume.DefaultMaxSizeGiB, "largest volume a create may ask for, in `GIB`")
	fs.IntVar(&cfg.TemplateQuota.MaxCount, "max-templates", templates.DefaultMaxCount, "templates an account may hold (403 forbidden past it); a template removed while in use no longer counts")
	templateGiB := fs.Int64("max-template-gib", templates.DefaultMaxBytes>>30, "`GIB` an account's templates may hold in all, each counting its own layers (403 forbidden past it); one snapshot or image may not write more either (413)")
	fs.DurationVar(&cfg.Manager.SnapshotRetention, "snapshot-retention", defaults.Retention, "how long a snapshot is kept before it is removed (a fork's is removed once its sandboxes run unless it asked to keep it)")
	storageGiB := fs.Int64("storage-quota-gib", storagequota.DefaultGiB, "`GIB` an account's snapshots and volumes may take in all (403 forbidden past it; 0: no bound)")
	fs.BoolVar(&cfg.PrivateRegistries, "allow-private-registries", false, "let template imports read images from registries at loopback, private and link-local addresses (an own registry on the internal network); without it only public addresses, so a reference cannot make the server call its own network")
	fs.DurationVar(&cfg.IdleExit, "idle-exit", 0, "exit once no request has been in flight and no sandbox alive (running or paused) for this long (0: never; the local daemon runs with 10m)")
	fs.StringVar(&cfg.E2BListen, "e2b-listen", "", "also serve E2B's API (control plane and in-sandbox protocol) on `ADDRESS`: point E2B_API_URL and E2B_SANDBOX_URL at it, a withruntime key as E2B_API_KEY")
	e2bInternet := fs.Bool("e2b-internet", true, "give a sandbox created through --e2b-listen without network options the internet, as E2B does (false: such a sandbox has none until its create allows it)")
	fs.StringVar(&cfg.E2BDomain, "e2b-domain", "", "route Host <port>-<id>.`DOMAIN` on --e2b-listen to sandboxes (older E2B clients; needs wildcard DNS and a wildcard TLS certificate in front)")
	fs.Func("webhook-permit", "a `CIDR` webhooks may be delivered to although it is loopback, link-local, private or the like (repeatable): an operator's own receivers", func(v string) error {
		p, err := netip.ParsePrefix(v)
		if err != nil || p != p.Masked() {
			return fmt.Errorf("webhook permit %q: want a CIDR without host bits, such as 10.1.0.0/16", v)
		}
		cfg.WebhookPermit = append(cfg.WebhookPermit, p)
		return nil
	})
	fs.StringVar(&cfg.PreviewListen, "preview-listen", "", "serve the preview URLs' host form, <port>-<id>.DOMAIN, on `ADDRESS` too (and nothing else there); DOMAIN is --preview-domain, localhost without it")
	fs.StringVar(&cfg.PreviewDomain, "preview-domain", "", "serve the preview URLs' host form <port>-<id>.`DOMAIN` (on the API's address, and on --preview-listen): needs wildcard DNS for DOMAIN, except localhost, whose names resolve to loopback")
	fs.StringVar(&cfg.Store, "store", "", "serve as one API server of a many-host installation on the shared database at `URL` (postgres://...): sandboxes then run on the nodes (withruntime node) registered there, and this server runs none")
	fs.DurationVar(&cfg.DetectInterval, "detect-interval", 0, fmt.Sprintf("with --store: how often to look for nodes whose lease ran out (0: %v)", cluster.DefaultDetectInterval))
	pidFile := fs.String("pid-file", "", "write the server's pid to `FILE` and hold a lock on it while serving (the local daemon's DATA_DIR/daemon.pid)")
	return func(args []string) int {
		if len(args) > 0 {
			fmt.Fprintf(os.Stderr, "serve: unexpected argument %q\nusage: withruntime serve [flags] (\"withruntime serve --help\" lists the flags)\n", args[0])
			return 2
		}
		cfg.TemplateQuota.MaxBytes = *templateGiB << 30
		cfg.StorageQuotaBytes = *storageGiB << 30
		cfg.E2BNoInternet = !*e2bInternet
		if *pidFile != "" {
			f, err := holdPidFile(*pidFile)
			if err != nil {
				fmt.Fprintf(os.Stderr, "error: invalid_request: %v\n", err)
				return 1
			}
			defer f.Close()
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := run(ctx, cfg); err != nil {
			fmt.Fprintf(os.Stderr, "error: internal: %v\n", err)
			return 1
		}
		return 0
	}
}

// startAndWait runs the server until ctx ends or it stops by itself.
func startAndWait(ctx context.Context, cfg server.Config) error {
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	return srv.Wait(ctx)
}

// runSetup is `withruntime setup`.
func runSetup(fs *pflag.FlagSet) func(args []string) int {
	o := setup.Options{Out: os.Stdout}
	fs.StringVar(&o.CacheDir, "cache-dir", server.DefaultCacheDir, "the `DIR` for images and runsc")
	fs.StringVar(&o.SourceDir, "source", ".", "the project's checkout `DIR` (its go.mod pins gVisor)")
	return func(args []string) int {
		if len(args) > 0 {
			fmt.Fprintf(os.Stderr, "setup: unexpected argument %q\nusage: withruntime setup [flags] (\"withruntime setup --help\" lists the flags)\n", args[0])
			return 2
		}
		src, err := filepath.Abs(o.SourceDir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "error: invalid_request: %v\n", err)
			return 1
		}
		o.SourceDir = src
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := setup.Run(ctx, o); err != nil {
			fmt.Fprintf(os.Stderr, "error: internal: %v\n", err)
			return 1
		}
		fmt.Println("setup complete")
		return 0
	}
}
