package microvm

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// A microVM's network is the gVisor tier's, one step further: the
// sandbox's namespace gets the same veth from the server's plumbing (the
// same packet rules steer it), and inside the namespace a bridge joins
// the veth's end to a tap whose descriptor QEMU is given. The guest's
// eth0 takes the sandbox's address; the namespace's own end has none.
const (
	tapName    = "tap0"
	bridgeName = "br0"
)

// attachNetwork wires sandbox id and returns its tap's descriptor (nil
// without egress: then the VM has no NIC at all).
func (b *Backend) attachNetwork(id string, p paths, spec sandbox.Spec) (*os.File, *network.Link, error) {
	if b.net == nil {
		return nil, nil, nil
	}
	if err := network.NewNamespace(p.netns); err != nil {
		return nil, nil, err
	}
	link, err := b.net.Attach(id, p.netns, p.state, spec.Network.Internet)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*os.File, *network.Link, error) {
		b.detachNetwork(id, p)
		return nil, nil, err
	}
	var tap *os.File
	err = network.InNamespace(p.netns, func() error {
		var err error
		if err = bridgeTap(link); err == nil {
			tap, err = openTap()
		}
		return err
	})
	if err != nil {
		return fail(fmt.Errorf("the VM's tap: %w", err))
	}
	return tap, &link, nil
}

// bridgeTap runs in the sandbox's namespace: a persistent tap and a
// bridge over it and eth0, whose address moves to the guest.
func bridgeTap(l network.Link) error {
	eth0, err := netlink.LinkByName("eth0")
	if err != nil {
		return err
	}
	addrs, _ := netlink.AddrList(eth0, netlink.FAMILY_V4)
	for _, a := range addrs {
		if err := netlink.AddrDel(eth0, &a); err != nil {
			return err
		}
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: tapName}, Mode: netlink.TUNTAP_MODE_TAP,
		Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR | netlink.TUNTAP_ONE_QUEUE}
	if err := netlink.LinkAdd(tap); err != nil {
		return fmt.Errorf("tap: %w", err)
	}
	for _, f := range tap.Fds {
		f.Close()
	}
	for _, name := range []string{"eth0", tapName} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetMaster(l, br); err != nil {
			return fmt.Errorf("%s into the bridge: %w", name, err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
	}
	return netlink.LinkSetUp(br)
}

// openTap opens the namespace's tap for QEMU (in the namespace).
func openTap() (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(tapName)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF: %w", err)
	}
	return os.NewFile(uintptr(fd), tapName), nil
}

// reopenTap gives a restored QEMU the tap of a namespace that outlived
// the one before it.
func (b *Backend) reopenTap(id string, p paths) (*os.File, error) {
	if b.plumb == nil {
		return nil, nil
	}
	var tap *os.File
	err := network.InNamespace(p.netns, func() error {
		var err error
		tap, err = openTap()
		return err
	})
	return tap, err
}

// adoptNetwork takes over the link of a sandbox a server before started
// (one made without egress has none).
func (b *Backend) adoptNetwork(id string, p paths) error {
	if err := b.net.Adopt(id, p.state); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// detachNetwork removes the sandbox's link and its namespace, with the
// bridge and the tap in it.
func (b *Backend) detachNetwork(id string, p paths) error {
	if b.net == nil {
		return nil
	}
	err := b.net.Detach(id, p.state)
	if rerr := network.RemoveNamespace(p.netns); err == nil && rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return err
}

// SandboxAddr implements sandbox.Networked.
func (b *Backend) SandboxAddr(id string) (netip.Addr, bool) { return b.net.Addr(id) }

// SetOnline implements sandbox.Networked.
func (b *Backend) SetOnline(id string, online bool) error { return b.net.SetOnline(id, online) }

// guestTrust is what the guest writes for egress: its resolver and the
// installation's CA files, and the variables that point clients at them.
func (b *Backend) guestTrust(l *network.Link) (files map[string]string, env []string, err error) {
	files = map[string]string{"/etc/resolv.conf": fmt.Sprintf("nameserver %s\noptions timeout:2 attempts:2\n", l.HostAddr)}
	if w := b.cfg.Egress; w != nil && w.CABundle != "" && w.CACert != "" {
		for path, src := range map[string]string{sandbox.CABundlePath: w.CABundle, sandbox.CACertPath: w.CACert} {
			data, err := os.ReadFile(src)
			if err != nil {
				return nil, nil, err
			}
			files[path] = string(data)
		}
		env = sandbox.CAEnv
	}
	return files, env, nil
}
