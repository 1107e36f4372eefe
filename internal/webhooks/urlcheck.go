package webhooks

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// refused are the addresses a webhook never reaches unless a permit
// covers them: what egress's blocklist refuses sandboxes, for the same
// reason (a tenant must not aim the server at its own internals).
var refused = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network", unspecified
	netip.MustParsePrefix("10.0.0.0/8"),     // RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),  // CGNAT (some clouds' metadata)
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, metadata 169.254.169.254
	netip.MustParsePrefix("172.16.0.0/12"),  // RFC 1918
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF assignments (a cloud's metadata 192.0.0.192)
	netip.MustParsePrefix("192.168.0.0/16"), // RFC 1918
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("224.0.0.0/4"),    // multicast
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, broadcast
	netip.MustParsePrefix("::/128"),         // unspecified
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("::ffff:0:0/96"),  // IPv4-mapped (checked as IPv4 too)
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64, embeds an IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("fc00::/7"),       // unique local
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("fec0::/10"),      // site-local
	netip.MustParsePrefix("ff00::/8"),       // multicast
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001::/32"),      // Teredo
	netip.MustParsePrefix("2002::/16"),      // 6to4
}

// Checker decides which URLs and addresses webhooks may reach.
type Checker struct {
	// Permit are prefixes reachable although refused (--webhook-permit).
	Permit []netip.Prefix
	// Resolve looks a name up; nil: the system's resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Allowed reports whether a webhook may reach addr.
func (c *Checker) Allowed(addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	addr = addr.WithZone("")
	for _, p := range c.Permit {
		if p.Contains(addr) || p.Contains(addr.Unmap()) {
			return true
		}
	}
	if addr.Is4In6() && !c.Allowed(addr.Unmap()) {
		return false
	}
	for _, p := range refused {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// CheckURL refuses (invalid_request) a URL that is not http or https with
// a host, or whose host is or resolves to an address Allowed refuses.
func (c *Checker) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Hostname() == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "webhook url %q: want an http or https URL with a host", raw)
	}
	if u.User != nil {
		return sandbox.Errorf(sandbox.KindInvalid, "webhook url: no user or password in it")
	}
	if len(raw) > 2048 {
		return sandbox.Errorf(sandbox.KindInvalid, "webhook url: at most 2048 bytes")
	}
	addrs, err := c.lookup(ctx, u.Hostname())
	if err != nil {
		return sandbox.Errorf(sandbox.KindInvalid, "webhook url: %s does not resolve: %v", u.Hostname(), err)
	}
	for _, a := range addrs {
		if !c.Allowed(a) {
			return sandbox.Errorf(sandbox.KindInvalid, "webhook url: %s is %s, an address webhooks may not reach (loopback, link-local, metadata, private; the operator may permit it with serve --webhook-permit)", u.Hostname(), a)
		}
	}
	return nil
}

func (c *Checker) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if c.Resolve != nil {
		return c.Resolve(ctx, host)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("no address")
	}
	return addrs, err
}

// control is a net.Dialer's Control: it runs on the address about to be
// connected to, after any name lookup, so a name that resolved to an
// allowed address at registration and to a refused one now is refused.
func (c *Checker) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhooks: dialling %s: %w", address, err)
	}
	if !c.Allowed(ap.Addr()) {
		return fmt.Errorf("webhooks: %s is an address webhooks may not reach", ap.Addr())
	}
	return nil
}
