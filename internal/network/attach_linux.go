package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/undo"
)

// lockPath serialises the choice of a /30 between every server on the
// host, from reading the host's addresses to putting the chosen one on a
// host end.
const lockPath = "/run/withruntime/network.lock"

var errNoDevice = unix.ENODEV

// Attach gives the sandbox id, whose network namespace is pinned at
// nsPath, its veth pair: the host end in the root namespace with the /30's
// first address, "eth0" in the sandbox's namespace with the second, up,
// with a default route to the host end. The sandbox is offline until
// SetOnline. On error nothing is left behind.
func (p *Plumbing) Attach(id, nsPath string) (_ Link, retErr error) {
	name, err := p.cfg.hostIf(id)
	if err != nil {
		return Link{}, err
	}
	ns, err := os.Open(nsPath)
	if err != nil {
		return Link{}, fmt.Errorf("opening namespace: %w", err)
	}
	defer ns.Close()
	var u undo.List
	defer u.Run(&retErr)
	l, err := p.create(name, ns)
	if err != nil {
		return Link{}, err
	}
	u.Add(func() { p.Detach(l) })
	if err := sandboxEnd(ns, l); err != nil {
		return Link{}, fmt.Errorf("configuring eth0 in %s: %w", nsPath, err)
	}
	p.hold(l.HostIf)
	// No flows to forget here: every way an address is given up (Detach,
	// Sweep) forgets its flows, and a dump of the connection table costs
	// tens of milliseconds on a busy host, too much for every create.
	return l, nil
}

// create chooses a free /30 and makes the veth pair with its peer already
// in the namespace ns, and configures the host end.
func (p *Plumbing) create(name string, ns *os.File) (_ Link, retErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	unlock, err := lockHost()
	if err != nil {
		return Link{}, err
	}
	defer unlock()
	var u undo.List
	defer u.Run(&retErr)
	inUse, err := hostPrefixes()
	if err != nil {
		return Link{}, err
	}
	pfx, ok := p.slots.take(newOccupied(inUse).busy)
	if !ok {
		return Link{}, fmt.Errorf("no free /30 in %s", p.cfg.Pool)
	}
	u.Add(func() { p.slots.free(pfx) })
	host, sandbox := ends(pfx)
	l := Link{HostIf: name, HostAddr: host, SandboxAddr: sandbox, Prefix: pfx}

	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(ns.Fd()),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return Link{}, fmt.Errorf("creating veth %s: %w", name, err)
	}
	u.Add(func() { netlink.LinkDel(veth) })
	// Before the link is up, so it never gets a link-local address.
	if err := disableIPv6(name); err != nil {
		return Link{}, err
	}
	if err := netlink.AddrAdd(veth, &netlink.Addr{IPNet: ipNet(host, pfx)}); err != nil {
		return Link{}, fmt.Errorf("adding %s to %s: %w", host, name, err)
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		return Link{}, fmt.Errorf("setting %s up: %w", name, err)
	}
	return l, nil
}

// sandboxEnd configures eth0 in ns, from a thread that enters ns and is
// never handed back to the Go scheduler.
func sandboxEnd(ns *os.File, l Link) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("entering namespace: %w", err)
			return
		}
		errc <- configureEth0(l)
	}()
	return <-errc
}

func configureEth0(l Link) error {
	eth0, err := netlink.LinkByName("eth0")
	if err != nil {
		return err
	}
	if err := disableIPv6("eth0"); err != nil {
		return err
	}
	if err := netlink.AddrAdd(eth0, &netlink.Addr{IPNet: ipNet(l.SandboxAddr, l.Prefix)}); err != nil {
		return fmt.Errorf("adding %s: %w", l.SandboxAddr, err)
	}
	if err := netlink.LinkSetUp(eth0); err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: l.HostAddr.AsSlice()}); err != nil {
		return fmt.Errorf("adding default route: %w", err)
	}
	return nil
}

// Adopt takes over a sandbox attached before a restart: its /30 is in use
// again. Its host end must still exist.
func (p *Plumbing) Adopt(l Link) error {
	if l.Prefix.Bits() != 30 || !p.cfg.Pool.Contains(l.Prefix.Addr()) {
		return fmt.Errorf("link %s: prefix %s is not a /30 of %s", l.HostIf, l.Prefix, p.cfg.Pool)
	}
	if _, err := p.hostEnd(l.HostIf); err != nil {
		return err
	}
	p.mu.Lock()
	p.slots.mark(l.Prefix)
	p.mu.Unlock()
	p.hold(l.HostIf)
	// The flows it had were steered to the ports of the server before.
	return forgetFlows(l.SandboxAddr)
}

// Detach deletes the host end of l (the peer goes with it) and frees its
// /30. A link already gone, as it is once the namespace is, is not an
// error.
func (p *Plumbing) Detach(l Link) error {
	p.release(l.HostIf)
	link, err := p.hostEnd(l.HostIf)
	switch {
	case errors.Is(err, ErrNoLink):
	case err != nil:
		return err
	default:
		if err := netlink.LinkDel(link); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting %s: %w", l.HostIf, err)
		}
	}
	p.mu.Lock()
	p.slots.free(l.Prefix)
	p.mu.Unlock()
	return forgetFlows(l.SandboxAddr)
}

// lockHost takes the host-wide allocation lock.
func lockHost() (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", lockPath, err)
	}
	return func() { f.Close() }, nil
}

// hostPrefixes lists the IPv4 prefixes of every address (and point-to-point
// peer) on the root namespace's interfaces, every server's host ends
// included.
func hostPrefixes() ([]netip.Prefix, error) {
	addrs, err := addrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("listing host addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if p, ok := prefixOf(a); ok {
			out = append(out, p)
		}
		if a.Peer != nil {
			if p, ok := netipPrefix(a.Peer); ok {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func prefixOf(a netlink.Addr) (netip.Prefix, bool) {
	if a.IPNet == nil {
		return netip.Prefix{}, false
	}
	return netipPrefix(a.IPNet)
}

func netipPrefix(n *net.IPNet) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := n.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), bits).Masked(), true
}

func ipNet(a netip.Addr, p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
}

// disableIPv6 turns IPv6 off on an interface of the calling thread's
// namespace. A kernel without IPv6 has nothing to turn off.
func disableIPv6(ifname string) error {
	err := os.WriteFile("/proc/sys/net/ipv6/conf/"+ifname+"/disable_ipv6", []byte("1"), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disabling IPv6 on %s: %w", ifname, err)
	}
	return nil
}
