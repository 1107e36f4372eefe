// Package guestnet configures a microVM guest's eth0 from inside: the
// guest's init at boot, and the agent when a sandbox started from a
// snapshot takes an address of its own. It imports only the standard
// library and x/sys/unix: both binaries are small and static.
package guestnet

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// Configure brings up lo and eth0 with addr/prefix and a default route
// through gw (the host's end of the sandbox's link). On an eth0 that has
// an address already (a restored machine) it replaces the address and
// the route.
func Configure(addrS string, prefix int, gwS string) error {
	addr, err := netip.ParseAddr(addrS)
	if err != nil {
		return err
	}
	gw, err := netip.ParseAddr(gwS)
	if err != nil {
		return err
	}
	if !addr.Is4() || !gw.Is4() || prefix < 1 || prefix > 32 {
		return fmt.Errorf("guest network %s/%d via %s: want IPv4", addr, prefix, gw)
	}
	// IPv4 only, as under gVisor (the host end drops IPv6 anyway).
	for _, k := range []string{"all", "default", "eth0"} {
		os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0o644)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := up(fd, "lo"); err != nil {
		return err
	}
	ifr, err := unix.NewIfreq("eth0")
	if err != nil {
		return err
	}
	if err := ifr.SetInet4Addr(addr.AsSlice()); err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFADDR, ifr); err != nil {
		return fmt.Errorf("address: %w", err)
	}
	m := ^uint32(0) << (32 - prefix)
	var mb [4]byte
	binary.BigEndian.PutUint32(mb[:], m)
	if err := ifr.SetInet4Addr(mb[:]); err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFNETMASK, ifr); err != nil {
		return fmt.Errorf("netmask: %w", err)
	}
	if err := up(fd, "eth0"); err != nil {
		return err
	}
	return defaultRoute(gw)
}

func up(fd int, name string) error {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("%s up: %w", name, err)
	}
	return nil
}

// defaultRoute sets 0.0.0.0/0 via gw with one RTM_NEWROUTE message
// (replacing one there is).
func defaultRoute(gw netip.Addr) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	msg := make([]byte, unix.SizeofNlMsghdr+unix.SizeofRtMsg+8)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_NEWROUTE)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_REPLACE)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	rt := msg[unix.SizeofNlMsghdr:]
	rt[0] = unix.AF_INET
	rt[4] = unix.RT_TABLE_MAIN
	rt[5] = unix.RTPROT_BOOT
	rt[6] = unix.RT_SCOPE_UNIVERSE
	rt[7] = unix.RTN_UNICAST
	attr := rt[unix.SizeofRtMsg:]
	binary.NativeEndian.PutUint16(attr[0:], 8)
	binary.NativeEndian.PutUint16(attr[2:], unix.RTA_GATEWAY)
	copy(attr[4:], gw.AsSlice())
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	if n >= unix.SizeofNlMsghdr+4 && binary.NativeEndian.Uint16(buf[4:]) == unix.NLMSG_ERROR {
		if code := int32(binary.NativeEndian.Uint32(buf[unix.SizeofNlMsghdr:])); code != 0 {
			return fmt.Errorf("default route: %w", unix.Errno(-code))
		}
	}
	return nil
}
