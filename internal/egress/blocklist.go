package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// neverReachable is the fixed part of the Blocklist (see the package doc);
// Config.Permit takes prefixes off it.
var neverReachable = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network", unspecified
	netip.MustParsePrefix("10.0.0.0/8"),     // RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),  // shared address space (carrier NAT; some clouds' metadata)
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, cloud metadata 169.254.169.254
	netip.MustParsePrefix("172.16.0.0/12"),  // RFC 1918
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments (a cloud's metadata 192.0.0.192)
	netip.MustParsePrefix("192.168.0.0/16"), // RFC 1918
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking (RFC 2544): test upstreams, never the internet
	netip.MustParsePrefix("224.0.0.0/4"),    // multicast
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, broadcast 255.255.255.255
	netip.MustParsePrefix("::/128"),         // unspecified
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("fc00::/7"),       // unique local
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("ff00::/8"),       // multicast
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001::/32"),      // Teredo, embeds an IPv4 address
	netip.MustParsePrefix("2002::/16"),      // 6to4, embeds an IPv4 address
}

var (
	loopback4 = netip.MustParsePrefix("127.0.0.0/8")
	loopback6 = netip.MustParseAddr("::1")
	// embedded4 are IPv6 ranges whose low 32 bits are an IPv4 address that
	// a translator would reach: such an address is as blocked as the IPv4
	// address it carries.
	embedded4 = []netip.Prefix{
		netip.MustParsePrefix("::/96"),        // IPv4-compatible (deprecated)
		netip.MustParsePrefix("64:ff9b::/96"), // NAT64
	}
)

// hostAddrTTL is how long the host's own addresses are cached.
const hostAddrTTL = 5 * time.Second

// Blocklist is the set of addresses no sandbox ever reaches, in any mode
// (see the package doc for the list). Its zero value is not usable: use
// NewBlocklist.
type Blocklist struct {
	extra []netip.Prefix
	// more are prefixes set after the start (SetMore), as extra.
	more atomic.Pointer[[]netip.Prefix]
	// permit are taken off neverReachable (never off extra or the host's
	// addresses).
	permit []netip.Prefix
	// unblockLoopback takes loopback off the list; only tests set it.
	unblockLoopback bool
	interfaceAddrs  func() ([]net.Addr, error)

	mu        sync.Mutex // guards hostAddrs and readAt
	hostAddrs map[netip.Addr]bool
	readAt    time.Time
}

// NewBlocklist returns the fixed list plus the host's own addresses plus
// the extra prefixes (say, the sandboxes' address pool).
func NewBlocklist(extra ...netip.Prefix) *Blocklist {
	return &Blocklist{extra: extra, interfaceAddrs: net.InterfaceAddrs}
}

// Blocked reports whether addr may never be reached. An invalid address is
// blocked.
func (b *Blocklist) Blocked(addr netip.Addr) bool {
	if !addr.IsValid() {
		return true
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		for _, p := range embedded4 {
			// :: and ::1 are in ::/96 but carry no IPv4 address; the
			// fixed list has them.
			if p.Contains(addr) && addr != netip.IPv6Unspecified() && addr != loopback6 {
				a16 := addr.As16()
				if b.Blocked(netip.AddrFrom4([4]byte(a16[12:]))) {
					return true
				}
			}
		}
	}
	if b.unblockLoopback && (loopback4.Contains(addr) || addr == loopback6) {
		return false
	}
	if !b.permitted(addr) {
		for _, p := range neverReachable {
			if p.Contains(addr) {
				return true
			}
		}
	}
	for _, p := range b.extra {
		if p.Contains(addr) {
			return true
		}
	}
	if more := b.more.Load(); more != nil {
		for _, p := range *more {
			if p.Contains(addr) {
				return true
			}
		}
	}
	return b.isHostAddr(addr)
}

// SetMore replaces the prefixes blocked besides the fixed list, the
// host's addresses and NewBlocklist's: addresses learnt while serving (a
// node's: the store's and the other nodes'). Like NewBlocklist's, no
// permit takes them off.
func (b *Blocklist) SetMore(prefixes []netip.Prefix) {
	p := append([]netip.Prefix(nil), prefixes...)
	b.more.Store(&p)
}

// isHostAddr reports whether addr is one of the host's own addresses, read
// from its interfaces at most hostAddrTTL ago. If they cannot be read,
// every address counts as the host's: failing closed.
func (b *Blocklist) isHostAddr(addr netip.Addr) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hostAddrs == nil || time.Since(b.readAt) > hostAddrTTL {
		addrs, err := b.interfaceAddrs()
		if err != nil {
			b.hostAddrs = nil
			return true
		}
		b.hostAddrs = make(map[netip.Addr]bool, len(addrs))
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				b.hostAddrs[p.Addr().Unmap().WithZone("")] = true
			} else if ip, err := netip.ParseAddr(a.String()); err == nil {
				b.hostAddrs[ip.Unmap().WithZone("")] = true
			}
		}
		b.readAt = time.Now()
	}
	return b.hostAddrs[addr]
}

func (b *Blocklist) permitted(addr netip.Addr) bool {
	for _, p := range b.permit {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// neverPermitted are the prefixes no permit may touch: the host itself.
var neverPermitted = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("::/127"), // :: and ::1
}

// ParsePermit parses a permitted prefix (serve --egress-permit): a CIDR
// without host bits that leaves loopback and "this network" alone.
func ParsePermit(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("permit %q: want a CIDR such as 198.18.0.0/15", s)
	}
	if err := CheckPermit(p); err != nil {
		return netip.Prefix{}, err
	}
	return p, nil
}

// CheckPermit reports why p cannot be permitted.
func CheckPermit(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return errors.New("permit: invalid prefix")
	case p.Addr().Is4In6():
		return fmt.Errorf("permit %s: write IPv4 prefixes as IPv4", p)
	case p != p.Masked():
		return fmt.Errorf("permit %s: host bits set (%s?)", p, p.Masked())
	}
	for _, n := range neverPermitted {
		if n.Overlaps(p) {
			return fmt.Errorf("permit %s: overlaps %s, the host itself", p, n)
		}
	}
	return nil
}
