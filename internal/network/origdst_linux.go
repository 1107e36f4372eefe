package network

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// OriginalDst is where a TCP connection that the rules redirected was
// headed (IPv4), as conntrack remembers it. It works on connections
// accepted by a listener on "0.0.0.0" or "" (an IPv6 socket with mapped
// addresses) as well.
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var mreq *unix.IPv6Mreq
	var serr error
	err = raw.Control(func(fd uintptr) {
		// The answer is a struct sockaddr_in; IPv6Mreq is a buffer at
		// least that long that x/sys/unix can fill without unsafe.
		mreq, serr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("getting original destination: %w", err)
	}
	sa := mreq.Multiaddr
	if fam := binary.NativeEndian.Uint16(sa[0:2]); fam != unix.AF_INET {
		return netip.AddrPort{}, fmt.Errorf("getting original destination: address family %d", fam)
	}
	port := binary.BigEndian.Uint16(sa[2:4])
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), port), nil
}
