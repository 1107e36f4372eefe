package network

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// dumpTries bounds the tries of a netlink dump. The kernel interrupts a
// dump when links or addresses change while it runs, as every sandbox's
// start and end on the host does, and the library then returns what it
// got with ErrDumpInterrupted: results that may be incomplete.
const dumpTries = 20

// CompleteDump runs dump (a netlink listing) until the kernel lets it
// finish, at most dumpTries times.
func CompleteDump[T any](dump func() (T, error)) (T, error) {
	for i := 1; ; i++ {
		v, err := dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || i == dumpTries {
			return v, err
		}
	}
}

// linkList lists every link of the namespace, whole.
func linkList() ([]netlink.Link, error) { return CompleteDump(netlink.LinkList) }

// addrList lists the addresses of link (every link when nil), whole.
func addrList(link netlink.Link, family int) ([]netlink.Addr, error) {
	return CompleteDump(func() ([]netlink.Addr, error) { return netlink.AddrList(link, family) })
}
