package network

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// forgetFlows deletes the connection-tracking entries a sandbox address
// has. Redirects are decided once per flow: an entry left by an earlier
// holder of the address (another server, or this one before a restart)
// would keep steering packets to ports nobody listens on any more.
func forgetFlows(addr netip.Addr) error {
	f := &netlink.ConntrackFilter{}
	if err := f.AddIP(netlink.ConntrackOrigSrcIP, net.IP(addr.AsSlice())); err != nil {
		return err
	}
	if _, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, f); err != nil {
		return fmt.Errorf("forgetting the flows of %s: %w", addr, err)
	}
	return nil
}
