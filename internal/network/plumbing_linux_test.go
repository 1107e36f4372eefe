package network

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestRedirect(t *testing.T) {
	t.Parallel()
	r := newRig(t, netip.Prefix{}) // the default pool
	l, ns := r.sandbox("sbx0123456789abcdef")
	if want := "w" + r.cfg.Name + "56789abcdef"; l.HostIf != want {
		t.Errorf("host end: got %s, want %s", l.HostIf, want)
	}
	if !DefaultPool.Contains(l.HostAddr) || l.Prefix.Bits() != 30 {
		t.Errorf("link %+v: want a /30 of %s", l, DefaultPool)
	}
	if err := r.p.SetOnline(l, true); err != nil {
		t.Fatalf("SetOnline: %v", err)
	}
	web := netip.AddrPortFrom(l.HostAddr, 443)

	t.Run("tcp to the proxy", func(t *testing.T) {
		if _, err := dialFrom(ns, web, 5*time.Second); err != nil {
			t.Fatalf("dial %s: %v", web, err)
		}
		c := r.expectConn(t)
		dst, err := OriginalDst(c)
		if err != nil {
			t.Fatalf("OriginalDst: %v", err)
		}
		if dst != web {
			t.Errorf("OriginalDst: got %s, want %s", dst, web)
		}
		if got := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(); got != l.SandboxAddr {
			t.Errorf("remote: got %s, want %s", got, l.SandboxAddr)
		}
		buf := make([]byte, 5)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(buf); err != nil || string(buf) != "hello" {
			t.Errorf("read: got %q, %v, want hello", buf, err)
		}
	})

	t.Run("udp dns to the resolver", func(t *testing.T) {
		dns := netip.AddrPortFrom(l.HostAddr, 53)
		answer, from, err := sendUDPFrom(ns, netip.Addr{}, dns, "query", 5*time.Second)
		if err != nil {
			t.Fatalf("query %s: %v", dns, err)
		}
		if d := r.expectDNS(t); d.data != "query" || d.from.Addr().Unmap() != l.SandboxAddr {
			t.Errorf("resolver got %q from %s, want query from %s", d.data, d.from, l.SandboxAddr)
		}
		if answer != "re:query" || from != dns {
			t.Errorf("answer: got %q from %s, want re:query from %s", answer, from, dns)
		}
	})

	t.Run("tcp dns to the resolver", func(t *testing.T) {
		dns := netip.AddrPortFrom(l.HostAddr, 53)
		if _, err := dialFrom(ns, dns, 5*time.Second); err != nil {
			t.Fatalf("dial %s: %v", dns, err)
		}
		c := r.expectConn(t)
		if got := c.LocalAddr().(*net.TCPAddr).Port; got != r.cfg.DNSPort {
			t.Errorf("landed on port %d, want the resolver's %d", got, r.cfg.DNSPort)
		}
	})

	t.Run("other udp goes nowhere", func(t *testing.T) {
		other, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.HostAddr, 9999)))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, _, err := sendUDPFrom(ns, netip.Addr{}, netip.AddrPortFrom(l.HostAddr, 9999), "x", 0); err != nil {
			t.Fatal(err)
		}
		expectNothing(t, other)
		r.expectNoDNS(t)
	})

	t.Run("the proxy port itself is closed", func(t *testing.T) {
		direct := netip.AddrPortFrom(l.HostAddr, uint16(r.cfg.ProxyPort))
		_, err := dialFrom(ns, direct, quiet)
		expectDropped(t, "dial "+direct.String(), err)
		r.expectNoConn(t)
		if _, _, err := sendUDPFrom(ns, netip.Addr{}, netip.AddrPortFrom(l.HostAddr, uint16(r.cfg.DNSPort)), "x", 0); err != nil {
			t.Fatal(err)
		}
		r.expectNoDNS(t)
	})

	t.Run("icmp is dropped", func(t *testing.T) {
		replied, err := ping(ns, l.HostAddr)
		if err != nil {
			t.Fatal(err)
		}
		if replied {
			t.Errorf("echo reply from %s, want none", l.HostAddr)
		}
	})

	t.Run("the host cannot use the ports", func(t *testing.T) {
		c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(r.cfg.ProxyPort)).String(), quiet)
		if err == nil {
			c.Close()
		}
		expectDropped(t, "loopback dial of the proxy port", err)
		r.expectNoConn(t)
		c, err = net.Dial("udp4", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(r.cfg.DNSPort)).String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("x"))
		c.Close()
		r.expectNoDNS(t)
	})

	t.Run("install again keeps the sandbox online", func(t *testing.T) {
		// A restarted server's plumbing rewrites the table; it is not
		// uninstalled here, which would take the rig's table and veths.
		if err := New(r.cfg).Install(); err != nil {
			t.Fatalf("second Install: %v", err)
		}
		if _, err := dialFrom(ns, web, 5*time.Second); err != nil {
			t.Fatalf("dial after Install: %v", err)
		}
		r.expectConn(t)
	})

	t.Run("offline drops everything", func(t *testing.T) {
		if err := r.p.SetOnline(l, false); err != nil {
			t.Fatalf("SetOnline: %v", err)
		}
		_, err := dialFrom(ns, web, quiet)
		expectDropped(t, "dial offline", err)
		r.expectNoConn(t)
		if _, _, err := sendUDPFrom(ns, netip.Addr{}, netip.AddrPortFrom(l.HostAddr, 53), "q", 0); err != nil {
			t.Fatal(err)
		}
		r.expectNoDNS(t)
		if err := r.p.SetOnline(l, true); err != nil {
			t.Fatal(err)
		}
		if _, err := dialFrom(ns, web, 5*time.Second); err != nil {
			t.Fatalf("dial back online: %v", err)
		}
		r.expectConn(t)
	})
}

func TestOfflineAfterAttach(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	l, ns := r.sandbox("fresh")
	_, err := dialFrom(ns, netip.AddrPortFrom(l.HostAddr, 443), quiet)
	expectDropped(t, "dial before SetOnline", err)
	r.expectNoConn(t)
}

func TestIPv6Dropped(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	l, _ := r.sandbox("six")
	for a := range hostIfAddrs(t, l.HostIf) {
		if a.Is6() {
			t.Errorf("host end has IPv6 address %s, want none", a)
		}
	}
	out, err := exec.Command("nft", "list", "table", "inet", r.cfg.table()).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "meta nfproto != ipv4 drop") {
		t.Errorf("table has no IPv6 drop:\n%s", out)
	}
}

func TestTwoSandboxes(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	a, nsA := r.sandbox("sandbox-a")
	b, nsB := r.sandbox("sandbox-b")
	if a.Prefix.Overlaps(b.Prefix) {
		t.Fatalf("prefixes overlap: %s and %s", a.Prefix, b.Prefix)
	}
	for _, l := range []Link{a, b} {
		if err := r.p.SetOnline(l, true); err != nil {
			t.Fatal(err)
		}
	}
	// Listening on B's address inside B proves the address is there.
	target := netip.AddrPortFrom(b.SandboxAddr, 8080)
	var inB *net.TCPListener
	var udpB *net.UDPConn
	err := InNamespace(nsB, func() (err error) {
		if inB, err = net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(target)); err != nil {
			return err
		}
		udpB, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(b.SandboxAddr, 9999)))
		return err
	})
	if err != nil {
		t.Fatalf("listening in B: %v", err)
	}
	defer inB.Close()
	defer udpB.Close()
	arrived := make(chan *net.TCPConn, 1)
	go acceptInto(inB, arrived)

	if _, err := dialFrom(nsA, target, 5*time.Second); err != nil {
		t.Fatalf("dial %s from A: %v", target, err)
	}
	var c net.Conn = r.expectConn(t)
	if dst, err := OriginalDst(c.(*net.TCPConn)); err != nil || dst != target {
		t.Errorf("OriginalDst: got %s, %v, want %s", dst, err, target)
	}
	if got := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(); got != a.SandboxAddr {
		t.Errorf("remote: got %s, want A's %s", got, a.SandboxAddr)
	}
	select {
	case c := <-arrived:
		c.Close()
		t.Errorf("connection reached B from %s, want none", c.RemoteAddr())
	case <-time.After(quiet):
	}
	// Forwarding on A's host end alone (never the host-wide switch), so
	// that only the rules stand between A and B, as on a host that
	// routes.
	fwd := "/proc/sys/net/ipv4/conf/" + a.HostIf + "/forwarding"
	if err := os.WriteFile(fwd, []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sendUDPFrom(nsA, netip.Addr{}, netip.AddrPortFrom(b.SandboxAddr, 9999), "x", 0); err != nil {
		t.Fatal(err)
	}
	expectNothing(t, udpB)

	// The host itself opens nothing into a sandbox.
	c, err = net.DialTimeout("tcp4", target.String(), quiet)
	if err == nil {
		c.Close()
	}
	expectDropped(t, "host dial into B", err)
	select {
	case c := <-arrived:
		c.Close()
		t.Errorf("host connection reached B, want none")
	default:
	}
}

func TestSpoofedSourceDropped(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	a, nsA := r.sandbox("spoofer")
	b, _ := r.sandbox("victim")
	if err := r.p.SetOnline(a, true); err != nil {
		t.Fatal(err)
	}
	if err := r.p.SetOnline(b, true); err != nil {
		t.Fatal(err)
	}
	// A claims B's address as well as its own.
	err := InNamespace(nsA, func() error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(eth0, &netlink.Addr{IPNet: ipNet(b.SandboxAddr, netip.PrefixFrom(b.SandboxAddr, 32))})
	})
	if err != nil {
		t.Fatal(err)
	}
	dns := netip.AddrPortFrom(a.HostAddr, 53)
	if _, _, err := sendUDPFrom(nsA, b.SandboxAddr, dns, "spoofed", 0); err != nil {
		t.Fatal(err)
	}
	r.expectNoDNS(t)
	if _, _, err := sendUDPFrom(nsA, a.SandboxAddr, dns, "honest", 5*time.Second); err != nil {
		t.Fatalf("query from A's own address: %v", err)
	}
	if d := r.expectDNS(t); d.data != "honest" {
		t.Errorf("resolver got %q, want honest", d.data)
	}
}

func TestDetachFreesPrefix(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	l, ns := r.sandbox("first")
	if err := r.p.Detach(l); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	if _, err := netlink.LinkByName(l.HostIf); err == nil {
		t.Errorf("host end %s still there after Detach", l.HostIf)
	}
	err := InNamespace(ns, func() error {
		if _, err := netlink.LinkByName("eth0"); err == nil {
			return errors.New("eth0 still in the namespace")
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if err := r.p.Detach(l); err != nil {
		t.Errorf("second Detach: got %v, want nil", err)
	}
	again, _ := r.sandbox("second")
	if again.Prefix != l.Prefix {
		t.Errorf("Attach after Detach: got %s, want the freed %s", again.Prefix, l.Prefix)
	}
}

func TestAttachRollsBack(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	_, ns := r.sandbox("taken")
	// The namespace already has an eth0: the second Attach must fail and
	// leave no host end behind.
	_, err := r.p.Attach("again", ns)
	if err == nil {
		t.Fatal("second Attach into the same namespace: got nil, want an error")
	}
	name, _ := r.cfg.hostIf("again")
	if _, err := netlink.LinkByName(name); err == nil {
		t.Errorf("host end %s left behind", name)
	}
	if _, err := r.p.Attach("bad/id", ns); err == nil {
		t.Error("Attach with a slash in the id: got nil, want an error")
	}
}

func TestSweep(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	keep, _ := r.sandbox("keepme")
	drop, _ := r.sandbox("dropme")
	if err := r.p.Sweep(func(name string) bool { return name == keep.HostIf }); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if _, err := netlink.LinkByName(keep.HostIf); err != nil {
		t.Errorf("kept %s: %v", keep.HostIf, err)
	}
	if _, err := netlink.LinkByName(drop.HostIf); err == nil {
		t.Errorf("swept %s still there", drop.HostIf)
	}
	next, _ := r.sandbox("next")
	if next.Prefix != drop.Prefix {
		t.Errorf("Attach after Sweep: got %s, want the freed %s", next.Prefix, drop.Prefix)
	}
}

func TestAdopt(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	l, _ := r.sandbox("survivor")
	// A restarted server: a new Plumbing with nothing marked.
	p := New(r.cfg)
	if err := p.Install(); err != nil {
		t.Fatal(err)
	}
	if err := p.Adopt(l); err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	if !p.slots.used[l.Prefix] {
		t.Errorf("prefix %s not marked used", l.Prefix)
	}
	gone := l
	gone.HostIf = "w" + r.cfg.Name + "nothere"
	if err := p.Adopt(gone); !errors.Is(err, ErrNoLink) {
		t.Errorf("Adopt of a missing link: got %v, want ErrNoLink", err)
	}
}

func TestTwoServersShareAPool(t *testing.T) {
	t.Parallel()
	pool := netip.PrefixFrom(testPool(t).Addr(), 29) // two /30s
	one, two := newRig(t, pool), newRig(t, pool)
	a, _ := one.sandbox("on-one")
	b, _ := two.sandbox("on-two")
	if a.Prefix == b.Prefix {
		t.Fatalf("both servers got %s", a.Prefix)
	}
	ns := t.TempDir() + "/ns"
	if err := NewNamespace(ns); err != nil {
		t.Fatal(err)
	}
	defer RemoveNamespace(ns)
	if l, err := one.p.Attach("third", ns); err == nil {
		one.p.Detach(l)
		t.Errorf("Attach in a full pool: got %s, want an error", l.Prefix)
	}
}

func TestUninstall(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	l, _ := r.sandbox("last")
	if !strings.Contains(tables(t), "inet "+r.cfg.table()+"\n") {
		t.Fatalf("table %s missing after Install:\n%s", r.cfg.table(), tables(t))
	}
	if err := r.p.Uninstall(); err != nil {
		t.Fatalf("Uninstall: %v", err)
	}
	if got := tables(t); strings.Contains(got, r.cfg.table()+"\n") {
		t.Errorf("table %s still there:\n%s", r.cfg.table(), got)
	}
	if _, err := netlink.LinkByName(l.HostIf); err == nil {
		t.Errorf("veth %s left without its table", l.HostIf)
	}
	if err := r.p.Uninstall(); err != nil {
		t.Errorf("second Uninstall: got %v, want nil", err)
	}
	// Uninstalled by its last user, the plumbing installs afresh.
	if err := r.p.Install(); err != nil {
		t.Fatalf("Install after Uninstall: %v", err)
	}
	if !strings.Contains(tables(t), "inet "+r.cfg.table()+"\n") {
		t.Errorf("table %s missing after a second Install:\n%s", r.cfg.table(), tables(t))
	}
	again, _ := r.sandbox("again")
	if again.Prefix != l.Prefix {
		t.Errorf("Attach after reinstalling: got %s, want the swept %s", again.Prefix, l.Prefix)
	}
}

// ping sends an ICMP echo request from inside the namespace and says
// whether a reply came back within quiet.
func ping(ns string, to netip.Addr) (replied bool, err error) {
	err = InNamespace(ns, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		msg := []byte{8, 0, 0, 0, 0x12, 0x34, 0, 1}
		sum := 0
		for i := 0; i < len(msg); i += 2 {
			sum += int(msg[i])<<8 | int(msg[i+1])
		}
		sum = (sum >> 16) + (sum & 0xffff)
		msg[2], msg[3] = ^byte(sum>>8), ^byte(sum)
		if err := unix.Sendto(fd, msg, 0, &unix.SockaddrInet4{Addr: to.As4()}); err != nil {
			return err
		}
		tv := unix.NsecToTimeval(quiet.Nanoseconds())
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		buf := make([]byte, 1500)
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				return nil // timed out: no reply
			}
			// buf holds the IP header, then ICMP: type 0 is an echo reply.
			if ihl := int(buf[0]&0x0f) * 4; n > ihl && buf[ihl] == 0 {
				replied = true
				return nil
			}
		}
	})
	return replied, err
}

// TestLeftTableSparesOtherListeners is the table a server that died left
// behind: its ports may go to any program later, and must stay open to it.
func TestLeftTableSparesOtherListeners(t *testing.T) {
	t.Parallel()
	requiresPlumbing(t)
	tcp, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	cfg := Config{Name: freshName(t), ProxyPort: tcp.Addr().(*net.TCPAddr).Port, DNSPort: udp.LocalAddr().(*net.UDPAddr).Port}
	p := New(cfg)
	if err := p.Install(); err != nil {
		t.Fatalf("Install: %v", err)
	}
	defer p.Uninstall()

	c, err := net.DialTimeout("tcp4", tcp.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatalf("dial an unmarked listener on the table's proxy port: %v", err)
	}
	c.Close()
	c, err = net.Dial("udp4", udp.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("x"))
	udp.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 8)
	if n, _, err := udp.ReadFromUDP(buf); err != nil || string(buf[:n]) != "x" {
		t.Errorf("datagram to an unmarked socket on the table's DNS port: got %q, %v", buf[:n], err)
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	l, _ := r.sandbox("gone")
	if err := Remove(r.cfg.Name); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if got := tables(t); strings.Contains(got, r.cfg.table()+"\n") {
		t.Errorf("table %s still there:\n%s", r.cfg.table(), got)
	}
	if _, err := netlink.LinkByName(l.HostIf); err == nil {
		t.Errorf("veth %s left after Remove", l.HostIf)
	}
	if err := Remove("x;y"); err == nil {
		t.Error("Remove of a name that is no server's: got nil, want an error")
	}
}

// TestSharedPlumbing: a server's two backends install its one plumbing;
// neither's sweep takes a link the other holds, and the table goes only
// with the last Uninstall.
func TestSharedPlumbing(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	other := r.p // the server's other backend
	if err := other.Install(); err != nil {
		t.Fatal(err)
	}
	held, _ := r.sandbox("heldbyvm")
	if err := r.p.Sweep(func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(held.HostIf); err != nil {
		t.Errorf("a link the plumbing's other user holds was swept: %v", err)
	}
	if err := other.Uninstall(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("nft", "list", "table", "inet", r.cfg.table()).CombinedOutput(); err != nil {
		t.Errorf("the table went with the first of two Uninstalls: %v %s", err, out)
	}
	// With one user left, a sweep takes what keep refuses again.
	if err := r.p.Sweep(func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(held.HostIf); err == nil {
		t.Errorf("%s survived a sweep with one user", held.HostIf)
	}
}
