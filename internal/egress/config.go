package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

// Defaults of Config.
const (
	DefaultDNSNamesPerMinute = 200
	DefaultPeekTimeout       = 300 * time.Millisecond
	DefaultHeadTimeout       = 10 * time.Second
	DefaultDialTimeout       = 10 * time.Second
	// DefaultMaxConns is how many proxied connections (DNS over TCP
	// included) one sandbox may hold open at once: far more than an agent
	// opens, far fewer than the host's file descriptors.
	DefaultMaxConns = 1024
	// DefaultAccountConnsFactor makes the default bound of one account's
	// proxied connections, all its sandboxes together: that many times
	// the bound of one sandbox.
	DefaultAccountConnsFactor = 4
	// DefaultIdleTimeout closes a proxied connection on which no byte has
	// moved either way for that long.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultDNSQueriesPerSecond is each sandbox's DNS rate (a second's
	// worth may come at once): well above what resolving for busy
	// clients takes.
	DefaultDNSQueriesPerSecond = 1000
	// DefaultDNSInflight is how many of a sandbox's DNS queries may be
	// answered at once.
	DefaultDNSInflight = 64
)

// halfClosedIdle bounds the silence on a connection one side of which has
// ended: the other side's answer is due, not a conversation.
const halfClosedIdle = time.Minute

// Config configures a Proxy: its TCP proxy and its DNS server. Zero values
// take the defaults.
type Config struct {
	// Directory finds the sandbox behind a source address. Required.
	Directory Directory
	// OriginalDst returns where a redirected connection was headed
	// (network.OriginalDst). Required.
	OriginalDst func(*net.TCPConn) (netip.AddrPort, error)
	// Secrets gives an account's secrets; nil: there are none.
	Secrets Secrets
	// CA mints the certificates presented for hosts with secrets. Required
	// with Secrets.
	CA *CA
	// Hosts are answered before the host's resolver (serve --egress-hosts).
	Hosts Hosts
	// ExtraRoots is PEM of roots trusted for upstream TLS besides the
	// system's (serve --egress-ca).
	ExtraRoots []byte
	// Blocked are prefixes added to the Blocklist: the sandboxes' own
	// address pool, say.
	Blocked []netip.Prefix
	// Lookup resolves names the hosts file does not know; nil: the host's
	// resolver.
	Lookup LookupFunc
	// Dial connects to upstreams; nil: a net.Dialer with DialTimeout. It is
	// only ever given addresses that are not Blocked.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Log receives the events; nil: a new Log (Proxy.Log).
	Log *Log
	// Logger gets the proxy's own troubles (an accept loop retrying);
	// nil: slog.Default().
	Logger *slog.Logger
	// Permit are prefixes taken off the fixed part of the Blocklist
	// (serve --egress-permit): 198.18.0.0/15 for test upstreams, an
	// operator's internal services. The host's own addresses, loopback
	// and Blocked stay blocked.
	Permit []netip.Prefix

	// DNSNamesPerMinute is how many distinct names a sandbox may resolve
	// in a minute (default 200): more would make DNS a channel out.
	DNSNamesPerMinute int
	// HandoutTTL is how long an address handed out by DNS opens opaque TCP
	// (default DefaultHandoutTTL).
	HandoutTTL time.Duration
	// PeekTimeout is how long a connection may stay silent before it is
	// taken for a server-first protocol (default 300 ms).
	PeekTimeout time.Duration
	// HeadTimeout is how long a client that has started has to finish its
	// ClientHello or request head (default 10 s).
	HeadTimeout time.Duration
	// DialTimeout bounds each upstream dial and TLS handshake (default 10 s).
	DialTimeout time.Duration
	// MaxConns is how many proxied connections a sandbox may hold at once
	// (default DefaultMaxConns); more are refused and logged.
	MaxConns int
	// MaxConnsAccount is how many all the sandboxes of one account may
	// hold at once (default DefaultAccountConnsFactor × MaxConns, and at
	// most three quarters of MaxConnsHost): one tenant's many sandboxes
	// cannot take every descriptor of the host, nor all of egress's.
	MaxConnsAccount int
	// MaxConnsHost is how many every sandbox together may hold at once;
	// 0: no such bound. A server sets it from its open files limit, so
	// that egress leaves the API and the agents' channels their
	// descriptors: a connection refused here is logged, where an accept at
	// EMFILE would fail for every sandbox alike.
	MaxConnsHost int
	// IdleTimeout closes a proxied connection idle both ways that long
	// (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// DNSQueriesPerSecond is each sandbox's DNS rate (default
	// DefaultDNSQueriesPerSecond); queries past it are REFUSED and logged.
	DNSQueriesPerSecond int
	// DNSInflight is how many of a sandbox's queries are answered at once
	// (default DefaultDNSInflight).
	DNSInflight int

	// UnblockLoopback takes loopback (and only loopback) off the
	// Blocklist. Unit tests set it because their upstreams can only live on
	// loopback; the end-to-end tests run the real thing, sandboxes in
	// network namespaces and upstreams in 198.18.0.0/15, without it. A
	// server never sets it.
	UnblockLoopback bool
}

func (c *Config) setDefaults() {
	if c.DNSNamesPerMinute <= 0 {
		c.DNSNamesPerMinute = DefaultDNSNamesPerMinute
	}
	if c.HandoutTTL <= 0 {
		c.HandoutTTL = DefaultHandoutTTL
	}
	if c.PeekTimeout <= 0 {
		c.PeekTimeout = DefaultPeekTimeout
	}
	if c.HeadTimeout <= 0 {
		c.HeadTimeout = DefaultHeadTimeout
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsAccount <= 0 {
		c.MaxConnsAccount = DefaultAccountConnsFactor * c.MaxConns
	}
	if c.MaxConnsHost > 0 {
		// However the bounds are set, a quarter of the host's stays for
		// the other accounts.
		c.MaxConnsAccount = min(c.MaxConnsAccount, max(c.MaxConnsHost*3/4, 1))
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.DNSQueriesPerSecond <= 0 {
		c.DNSQueriesPerSecond = DefaultDNSQueriesPerSecond
	}
	if c.DNSInflight <= 0 {
		c.DNSInflight = DefaultDNSInflight
	}
	if c.Log == nil {
		c.Log = NewLog()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Dial == nil {
		d := &net.Dialer{Timeout: c.DialTimeout}
		c.Dial = d.DialContext
	}
}

// Validate reports a configuration the proxy cannot run with.
func (c Config) Validate() error {
	switch {
	case c.Directory == nil:
		return errors.New("egress: no Directory")
	case c.OriginalDst == nil:
		return errors.New("egress: no OriginalDst")
	case c.Secrets != nil && c.CA == nil:
		return errors.New("egress: Secrets without a CA")
	}
	for _, p := range c.Blocked {
		if !p.IsValid() {
			return fmt.Errorf("egress: invalid blocked prefix %v", p)
		}
	}
	for _, p := range c.Permit {
		if err := CheckPermit(p); err != nil {
			return fmt.Errorf("egress: %w", err)
		}
	}
	if len(c.ExtraRoots) > 0 {
		if _, err := rootPool(c.ExtraRoots); err != nil {
			return err
		}
	}
	return nil
}

// rootPool is the system's roots plus the PEM certificates in extra.
func rootPool(extra []byte) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if len(extra) > 0 && !pool.AppendCertsFromPEM(extra) {
		return nil, errors.New("egress: ExtraRoots holds no PEM certificate")
	}
	return pool, nil
}
