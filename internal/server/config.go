package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/httpapi"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/membudget"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// DefaultListen is the address clients try when none is configured.
const DefaultListen = "127.0.0.1:7878"

// DefaultCacheDir holds images and runsc, shared by every data dir.
const DefaultCacheDir = "/var/cache/withruntime"

// Config is the server's configuration, and of a node's what it shares
// with serve (NodeConfig embeds it). Zero fields take the defaults the
// packages apply (package defaults for those more than one applies);
// RegisterFlags registers the flags serve and node share, with the same
// defaults.
type Config struct {
	Listen   string
	DataDir  string
	CacheDir string
	// SDKDir holds the SDK packages served at /sdk/ (internal/sdkdist);
	// default CacheDir/sdk, where scripts/sdk-build.sh puts them at setup.
	SDKDir string
	// Backend is the default isolation when Isolation is "" (tests name
	// one; default: the backend every server runs); Isolation is serve
	// --isolation: "auto" (the host chooses: isolation.go) or a
	// registered backend's name.
	Backend   string
	Isolation string
	// BackendOptions are the values of the registered backends' own
	// flags (sandbox.Registration's Options: serve --microvm-accel, say),
	// by flag name; an option not set has its default.
	BackendOptions map[string]string
	Logger         *slog.Logger
	// Quiet suppresses the one-time notice about the admin key (for
	// servers with no operator to tell).
	Quiet   bool
	Manager manager.Config
	// MaxConns bounds the API's open client connections
	// (admission.DefaultMaxConns when 0; see admission.Listener).
	MaxConns int
	// Trial is the trial offer of POST /v1/trial (off unless Enabled),
	// and the bounds of every trial account.
	Trial httpapi.TrialConfig
	// MaxKeysPerAccount bounds the keys an account holds, and those its
	// keys make in a day (serve --max-keys-per-account; 0:
	// accounts.DefaultMaxKeysPerAccount).
	MaxKeysPerAccount int
	// StorageQuotaBytes bounds what an account's snapshots and volumes
	// take together (serve --storage-quota-gib; 0: no bound).
	StorageQuotaBytes int64
	// MaxVolumeGiB bounds one volume (serve --max-volume-gib; 0:
	// volume.DefaultMaxSizeGiB).
	MaxVolumeGiB int
	// TemplateQuota bounds each account's templates (serve
	// --max-templates, --max-template-gib; zero fields: the templates
	// package's defaults).
	TemplateQuota store.TemplateQuota
	// PrivateRegistries lets a template import reach registries at
	// loopback, private and link-local addresses (serve
	// --allow-private-registries).
	PrivateRegistries bool
	// PricesFile, when set, is a JSON price table (billing.Prices) that
	// replaces the default prices.
	PricesFile string
	// NoEgress runs sandboxes without any network (no packet rules, no
	// proxy): network access is then refused with not_supported.
	NoEgress bool
	// EgressHosts is a hosts file the egress resolver answers from before
	// the host's resolver; EgressCA is PEM of extra roots trusted for
	// upstream TLS.
	EgressHosts, EgressCA string
	// SandboxCA are PEM files of certificates every sandbox trusts besides
	// the image's roots and the platform's own authority (serve
	// --sandbox-ca): the root of a TLS-inspecting proxy in front of the
	// host, say. They join the bundle sandboxes mount read-only.
	SandboxCA []string
	// EgressPermit are prefixes sandboxes may reach although the
	// blocklist refuses them (serve --egress-permit): 198.18.0.0/15 for
	// test upstreams, an operator's internal services. Never the host's
	// own addresses or loopback.
	EgressPermit []netip.Prefix
	// WebhookPermit are prefixes webhooks may be delivered to although
	// they are loopback, link-local, private and the like (serve
	// --webhook-permit): an operator's own receivers, or a test's.
	WebhookPermit []netip.Prefix
	// EgressMaxConns is how many proxied connections one sandbox holds at
	// once (serve --egress-max-conns), EgressMaxConnsAccount all of one
	// account's sandboxes (--egress-max-conns-account; 0: four times
	// EgressMaxConns); EgressIdleTimeout closes a proxied
	// connection idle both ways that long (--egress-idle-timeout);
	// EgressDNSRate is each sandbox's DNS queries per second
	// (--egress-dns-rate). Zero: the defaults of package egress.
	EgressMaxConns        int
	EgressMaxConnsAccount int
	EgressIdleTimeout     time.Duration
	EgressDNSRate         int
	// IdleExit ends Wait once the server has had no request in flight and
	// no sandbox alive (starting, running or paused) for this long
	// (serve --idle-exit; 0: never). The local daemon runs with it.
	IdleExit time.Duration
	// E2BListen, when set, is the address E2B's protocol is served on
	// (serve --e2b-listen: control plane and sandbox side on one address;
	// package e2bcompat). E2BDomain routes Host "<port>-<id>.<domain>" to
	// sandboxes there (serve --e2b-domain: needs wildcard DNS and, for
	// TLS, a wildcard certificate in front).
	E2BListen, E2BDomain string
	// E2BNoInternet gives a sandbox whose E2B create says nothing of the
	// network none (serve --e2b-internet=false); by default it has the
	// internet, as on E2B.
	E2BNoInternet bool
	// PreviewDomain serves the preview URLs' host form, Host
	// "<port>-<id>.<domain>" (serve --preview-domain): on the API's
	// listener, and on PreviewListen when set (serve --preview-listen,
	// which then serves nothing else; without a domain it takes
	// "localhost", whose names resolve to loopback with no DNS set up).
	PreviewListen, PreviewDomain string
	// MetricsListen, when set, serves Prometheus' GET /metrics there
	// (serve --metrics-listen; package promexport).
	MetricsListen string
	// Store, when set, is the URL of a shared store (serve --store
	// postgres://...): the server is then an API server of a many-host
	// installation, running no sandbox itself (cluster.go).
	Store string
	// DetectInterval is how often an API server's failure detector looks
	// for nodes whose lease ran out (0: internal/cluster's default).
	DetectInterval time.Duration
	// AgentMemoryMiB bounds in sum what the server holds of sandboxes'
	// answers in progress (serve --agent-memory-budget; 0:
	// membudget.DefaultTotal): an account a quarter of it, a sandbox an
	// eighth (package membudget).
	AgentMemoryMiB int
	agentMemory    *membudget.Budget // made from it by agentBudget
}

// defaultSize is the size the manager gives a create that names none,
// which the API cuts a trial's to (zero fields: the same defaults in both).
func (c *Config) defaultSize() httpapi.Size {
	return httpapi.Size{VCPUs: c.Manager.DefaultVCPUs, MemoryMiB: c.Manager.DefaultMemoryMiB, DiskGiB: (c.Manager.DiskMiB + 1023) >> 10}
}

// agentBudget is the one budget of agents' answers the API and the E2B
// layer share, made on first use.
func (c *Config) agentBudget() *membudget.Budget {
	if c.agentMemory == nil {
		mib := c.AgentMemoryMiB
		if mib <= 0 {
			mib = membudget.DefaultTotal >> 20
		}
		c.agentMemory = membudget.New(int64(mib) << 20)
	}
	return c.agentMemory
}

func (c *Config) setDefaults() {
	if c.PreviewListen != "" && c.PreviewDomain == "" {
		c.PreviewDomain = "localhost"
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.CacheDir == "" {
		c.CacheDir = DefaultCacheDir
	}
	if c.SDKDir == "" {
		c.SDKDir = filepath.Join(c.CacheDir, "sdk")
	}
	if c.Backend == "" {
		c.Backend = requiredIsolation()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	if !filepath.IsAbs(c.CacheDir) {
		return errors.New("--cache-dir must be an absolute path")
	}
	if c.Isolation != "" && !slices.Contains(isolationChoices(), c.Isolation) {
		return fmt.Errorf("--isolation %q: want %s", c.Isolation, sandbox.OneOf(isolationChoices()))
	}
	if err := sandbox.CheckOptions(c.BackendOptions); err != nil {
		return err
	}
	if c.AgentMemoryMiB < 0 {
		return errors.New("--agent-memory-budget must not be negative")
	}
	if c.MaxKeysPerAccount < 0 {
		return errors.New("--max-keys-per-account must not be negative")
	}
	if c.MaxVolumeGiB < 0 {
		return errors.New("--max-volume-gib must not be negative")
	}
	if err := c.Trial.Validate(); err != nil {
		return err
	}
	for _, p := range c.EgressPermit {
		if err := egress.CheckPermit(p); err != nil {
			return fmt.Errorf("--egress-permit: %w", err)
		}
	}
	for _, p := range c.WebhookPermit {
		if !p.IsValid() || p != p.Masked() {
			return fmt.Errorf("--webhook-permit %s: want a CIDR without host bits", p)
		}
	}
	switch {
	case c.EgressMaxConns < 0:
		return errors.New("--egress-max-conns must not be negative")
	case c.EgressMaxConnsAccount < 0:
		return errors.New("--egress-max-conns-account must not be negative")
	case c.EgressIdleTimeout < 0:
		return errors.New("--egress-idle-timeout must not be negative")
	case c.EgressIdleTimeout > 0 && c.EgressIdleTimeout < time.Second:
		// Shorter would cut a connection waiting for a slow answer.
		return fmt.Errorf("--egress-idle-timeout %v: must be at least 1s", c.EgressIdleTimeout)
	case c.EgressDNSRate < 0:
		return errors.New("--egress-dns-rate must not be negative")
	case c.E2BDomain != "" && c.E2BListen == "":
		return errors.New("--e2b-domain needs --e2b-listen")
	case c.IdleExit < 0:
		return errors.New("--idle-exit must not be negative")
	case c.PreviewDomain != "" && !validPreviewDomain(c.PreviewDomain):
		return fmt.Errorf("--preview-domain %q: want a DNS name such as preview.example.com or localhost", c.PreviewDomain)
	}
	return nil
}

// validPreviewDomain says whether d is a DNS name: dot-separated labels
// of letters, digits and hyphens.
func validPreviewDomain(d string) bool {
	if len(d) > 200 {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
