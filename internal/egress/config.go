package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
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
)

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
	if c.Log == nil {
		c.Log = NewLog()
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
