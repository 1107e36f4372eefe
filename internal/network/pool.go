package network

import (
	"encoding/binary"
	"net/netip"
)

// slots hands out the /30s of a pool, lowest first.
type slots struct {
	pool netip.Prefix
	used map[netip.Prefix]bool
}

func newSlots(pool netip.Prefix) *slots {
	return &slots{pool: pool, used: map[netip.Prefix]bool{}}
}

// take returns the first free /30 that busy does not refuse, and marks it
// used.
func (s *slots) take(busy func(netip.Prefix) bool) (netip.Prefix, bool) {
	first := u32(s.pool.Addr())
	n := uint64(1) << (32 - s.pool.Bits())
	for off := uint64(0); off < n; off += 4 {
		p := netip.PrefixFrom(addr4(first+uint32(off)), 30)
		if s.used[p] || busy(p) {
			continue
		}
		s.used[p] = true
		return p, true
	}
	return netip.Prefix{}, false
}

func (s *slots) mark(p netip.Prefix) { s.used[p.Masked()] = true }
func (s *slots) free(p netip.Prefix) { delete(s.used, p.Masked()) }

// ends gives the host's and the sandbox's address of a /30: its first and
// second usable address.
func ends(p netip.Prefix) (host, sandbox netip.Addr) {
	base := u32(p.Masked().Addr())
	return addr4(base + 1), addr4(base + 2)
}

// occupied says whether a /30 overlaps any of the prefixes already in use
// on the host. Prefixes of /30 or narrower are looked up by their /30;
// the rare wider ones are checked one by one.
type occupied struct {
	narrow map[netip.Prefix]bool
	wide   []netip.Prefix
}

func newOccupied(prefixes []netip.Prefix) occupied {
	o := occupied{narrow: map[netip.Prefix]bool{}}
	for _, p := range prefixes {
		if !p.Addr().Is4() {
			continue
		}
		if p.Bits() >= 30 {
			o.narrow[netip.PrefixFrom(p.Addr(), 30).Masked()] = true
		} else {
			o.wide = append(o.wide, p.Masked())
		}
	}
	return o
}

func (o occupied) busy(p netip.Prefix) bool {
	if o.narrow[p] {
		return true
	}
	for _, w := range o.wide {
		if w.Overlaps(p) {
			return true
		}
	}
	return false
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addr4(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
