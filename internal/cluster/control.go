// Package cluster is the control plane of a many-host installation: the
// API server's side of service.Sandboxes. It places creates on nodes by
// their reported load, forwards every call about a sandbox to the node
// that holds it over the node RPC (internal/noderpc, mutual TLS), reads
// records from the shared store, and runs the failure detector that gives
// up on nodes whose lease ran out.
//
// It holds no sandbox itself and imports no backend, network or manager
// code: what a node does stays on the node.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/defaults"
	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// Authority makes the TLS configuration of calls to a node and issues
// nodes their certificates (*clusterpki.Authority).
type Authority interface {
	ClientTLS(nodeID string) (*tls.Config, error)
	IssueNode(ctx context.Context, st clusterpki.Issuer, n store.Node) (bool, error)
}

// issueTimeout bounds the issue of a node's first certificate before a
// call to it.
const issueTimeout = 5 * time.Second

// DefaultDetectInterval is Config.DetectInterval's default (serve
// --detect-interval).
const DefaultDetectInterval = 2 * time.Second

// Config is the control plane's configuration. Zero values take the
// defaults.
type Config struct {
	Store     Store
	Authority Authority
	Logger    *slog.Logger

	// DetectInterval is how often the failure detector looks for nodes
	// whose lease ran out (default DefaultDetectInterval).
	DetectInterval time.Duration
	// DefaultVCPUs, DefaultMemoryMiB and DefaultDiskMiB are the size
	// placement assumes for a create that does not say (the nodes'
	// defaults, package defaults' when 0).
	DefaultVCPUs     int
	DefaultMemoryMiB int
	DefaultDiskMiB   int
	// DefaultConcurrency must be the nodes' managers' value (default
	// defaults.Concurrency, as theirs).
	DefaultConcurrency int

	// Now is the clock of end times (default time.Now).
	Now func() time.Time
}

func (c *Config) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.DefaultVCPUs, defaults.VCPUs)
	def(&c.DefaultMemoryMiB, defaults.MemoryMiB)
	def(&c.DefaultDiskMiB, defaults.DiskMiB)
	def(&c.DefaultConcurrency, defaults.Concurrency)
	if c.DetectInterval == 0 {
		c.DetectInterval = DefaultDetectInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("cluster: the control plane needs a store")
	case c.Authority == nil:
		return errors.New("cluster: the control plane needs the installation's authority")
	case c.DetectInterval < 0:
		return errors.New("cluster: the detect interval must be positive")
	case c.DefaultConcurrency < 1:
		return errors.New("cluster: default concurrency must be at least 1")
	}
	return nil
}

// Control implements service.Sandboxes over the nodes of the store's
// registry.
type Control struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex // guards clients, placed and unremoved
	// clients holds one client per node registration and address: a node
	// that registers again (new epoch) or moves gets a fresh one.
	clients map[clientKey]*noderpc.Client
	// placed is what this process put on each node since the node's last
	// reported load: creates in a burst spread before the next renewal
	// says where they went.
	placed map[string]placement
	// unremoved holds the shared checkpoints whose retention is over but
	// that no live node can remove yet (said once each).
	unremoved map[string]bool
}

type clientKey struct {
	id    string
	epoch int64
	addr  string
}

type placement struct {
	renewedAt time.Time // the node's RenewedAt the counts add to
	vcpus     int
	memoryMiB int
	diskMiB   int
}

var _ service.Sandboxes = (*Control)(nil)

// New returns the control plane of cfg.
func New(cfg Config) (*Control, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Control{
		cfg: cfg, log: cfg.Logger,
		clients:   map[clientKey]*noderpc.Client{},
		placed:    map[string]placement{},
		unremoved: map[string]bool{},
	}, nil
}

// DefaultConcurrency is the account concurrency the API shows for accounts
// without their own (httpapi.Config.DefaultConcurrency).
func (c *Control) DefaultConcurrency() int { return c.cfg.DefaultConcurrency }

// client returns the cached client of node n's registration.
func (c *Control) client(n store.Node) (*noderpc.Client, error) {
	k := clientKey{n.ID, n.Epoch, n.Addr}
	c.mu.Lock()
	cl := c.clients[k]
	c.mu.Unlock()
	if cl != nil {
		return cl, nil
	}
	if n.CSR != "" && n.Cert == "" {
		// A node that registered since the issuer last ran: its first
		// certificate now, so that this call need not wait for the next
		// run (the node's handshake reads it from its entry).
		ctx, cancel := context.WithTimeout(context.Background(), issueTimeout)
		if _, err := c.cfg.Authority.IssueNode(ctx, c.cfg.Store, n); err != nil {
			c.log.Warn("issuing a node's certificate", "node", n.ID, "err", err)
		}
		cancel()
	}
	tc, err := c.cfg.Authority.ClientTLS(n.ID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.clients[k]; cl != nil {
		return cl, nil
	}
	for old, cl := range c.clients {
		if old.id == n.ID {
			cl.Close()
			delete(c.clients, old)
		}
	}
	cl = noderpc.NewClient(n.ID, n.Addr, tc)
	c.clients[k] = cl
	return cl, nil
}

// Close drops the idle connections to the nodes.
func (c *Control) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, cl := range c.clients {
		cl.Close()
		delete(c.clients, k)
	}
}

func (c *Control) now() time.Time { return c.cfg.Now().UTC().Truncate(time.Millisecond) }

// live reports whether a node's registration still serves.
func live(n store.Node) bool { return !n.Lost && !n.Expired }
