package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/backend/microvm/guest"
)

// configureNet brings up lo and eth0 with the sandbox's address and a
// default route through the host's end of its link.
func configureNet(n guest.Net) error {
	addr, err := netip.ParseAddr(n.Addr)
	if err != nil {
		return err
	}
	gw, err := netip.ParseAddr(n.Gw)
	if err != nil {
		return err
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
	m := ^uint32(0) << (32 - n.Prefix)
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

// defaultRoute adds 0.0.0.0/0 via gw with one RTM_NEWROUTE message.
func defaultRoute(gw netip.Addr) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	msg := make([]byte, unix.SizeofNlMsghdr+unix.SizeofRtMsg+8)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_NEWROUTE)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
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
