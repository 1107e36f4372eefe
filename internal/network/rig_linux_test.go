package network

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/withruntime/withruntime/internal/testenv"
)

// quiet is how long a test waits to be sure that nothing arrives.
const quiet = 300 * time.Millisecond

// requiresPlumbing skips (fails under CI) without root or nft.
func requiresPlumbing(t testing.TB) {
	t.Helper()
	testenv.RequiresRoot(t)
	if _, err := exec.LookPath("nft"); err != nil {
		if _, err := os.Stat("/usr/sbin/nft"); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("CI must have this: nft is not installed")
			}
			t.Skip("nft is not installed")
		}
	}
}

// rig is one server's plumbing with a proxy and a resolver that listen on
// every address and report what reaches them.
type rig struct {
	t     testing.TB
	p     *Plumbing
	cfg   Config
	conns chan *net.TCPConn // accepted by the proxy
	dns   chan datagram     // UDP at the resolver (it echoes them)
}

type datagram struct {
	data string
	from netip.AddrPort
}

// newRig installs a table under a fresh name with listeners of its own;
// everything is removed when the test ends.
func newRig(t testing.TB, pool netip.Prefix) *rig {
	t.Helper()
	requiresPlumbing(t)
	r := &rig{t: t, conns: make(chan *net.TCPConn, 16), dns: make(chan datagram, 16)}
	proxy, err := ListenTCP(&net.TCPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	go acceptInto(proxy, r.conns)
	udp, tcp := resolverListeners(t)
	go echoUDP(udp, r.dns)
	go acceptInto(tcp, r.conns)

	r.cfg = Config{
		Name:      freshName(t),
		ProxyPort: proxy.Addr().(*net.TCPAddr).Port,
		DNSPort:   udp.LocalAddr().(*net.UDPAddr).Port,
		Pool:      pool,
	}
	r.p = New(r.cfg)
	if err := r.p.Install(); err != nil {
		t.Fatalf("Install: %v", err)
	}
	t.Cleanup(func() {
		if err := r.p.Uninstall(); err != nil {
			t.Errorf("Uninstall: %v", err)
		}
	})
	return r
}

// resolverListeners listens for UDP and TCP on one free port.
func resolverListeners(t testing.TB) (*net.UDPConn, *net.TCPListener) {
	t.Helper()
	for range 20 {
		udp, err := ListenUDP(&net.UDPAddr{})
		if err != nil {
			t.Fatal(err)
		}
		tcp, err := ListenTCP(&net.TCPAddr{Port: udp.LocalAddr().(*net.UDPAddr).Port})
		if err != nil {
			udp.Close()
			continue
		}
		t.Cleanup(func() { udp.Close(); tcp.Close() })
		return udp, tcp
	}
	t.Fatal("no port free for both UDP and TCP")
	return nil, nil
}

func acceptInto(l net.Listener, ch chan<- *net.TCPConn) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		ch <- c.(*net.TCPConn)
	}
}

func echoUDP(c *net.UDPConn, ch chan<- datagram) {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		ch <- datagram{string(buf[:n]), from}
		c.WriteToUDPAddrPort(append([]byte("re:"), buf[:n]...), from)
	}
}

// freshName picks a server name that no table or interface on the host
// uses yet.
func freshName(t testing.TB) string {
	t.Helper()
	const chars = "0123456789abcdefghijklmnopqrstuvwxyz"
	out, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables: %v: %s", err, out)
	}
	links, err := linkList()
	if err != nil {
		t.Fatal(err)
	}
next:
	for range 100 {
		var b [nameLen]byte
		for i := range b {
			n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(chars))))
			b[i] = chars[n.Int64()]
		}
		name := string(b[:])
		if strings.Contains(string(out), "withruntime_"+name+"\n") {
			continue
		}
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, "w"+name) {
				continue next
			}
		}
		return name
	}
	t.Fatal("no free server name")
	return ""
}

// testPool is a /26 of the default pool's upper half, away from where
// servers on this host start allocating, so that a test can expect a
// freed /30 to come back.
func testPool(t testing.TB) netip.Prefix {
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<13))
	base := u32(netip.MustParseAddr("100.104.0.0")) + uint32(n.Int64())<<6
	return netip.PrefixFrom(addr4(base), 26)
}

// sandbox makes a namespace and attaches it, and checks that both ends
// carry their addresses before any test sends a packet to them.
func (r *rig) sandbox(id string) (Link, string) {
	t := r.t
	t.Helper()
	ns := filepath.Join(t.TempDir(), "ns")
	if err := NewNamespace(ns); err != nil {
		t.Fatalf("NewNamespace: %v", err)
	}
	t.Cleanup(func() { RemoveNamespace(ns) })
	l, err := r.p.Attach(id, ns)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	t.Cleanup(func() { r.p.Detach(l) })
	if got := hostIfAddrs(t, l.HostIf); !got[l.HostAddr] {
		t.Fatalf("host end %s: got addresses %v, want %s", l.HostIf, got, l.HostAddr)
	}
	err = InNamespace(ns, func() error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(eth0, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		if len(addrs) != 1 || !addrs[0].IP.Equal(l.SandboxAddr.AsSlice()) {
			return fmt.Errorf("eth0 has %v, want only %s", addrs, l.SandboxAddr)
		}
		routes, err := CompleteDump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
		if err != nil {
			return err
		}
		for _, rt := range routes {
			if isDefault(rt.Dst) && rt.Gw.Equal(l.HostAddr.AsSlice()) {
				return nil
			}
		}
		return fmt.Errorf("no default route via %s in %v", l.HostAddr, routes)
	})
	if err != nil {
		t.Fatalf("sandbox end: %v", err)
	}
	return l, ns
}

func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0
}

func hostIfAddrs(t testing.TB, name string) map[netip.Addr]bool {
	t.Helper()
	link, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatalf("host end %s: %v", name, err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	got := map[netip.Addr]bool{}
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP)
		got[ip.Unmap()] = true
	}
	return got
}

// dialFrom dials TCP from inside the namespace and sends hello.
func dialFrom(ns string, to netip.AddrPort, timeout time.Duration) (*net.TCPConn, error) {
	var c net.Conn
	err := InNamespace(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", to.String(), timeout)
		if err != nil {
			return err
		}
		_, err = c.Write([]byte("hello"))
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// sendUDPFrom sends one datagram from inside the namespace, from the
// address from if it is valid, and waits up to wait for one answer.
func sendUDPFrom(ns string, from netip.Addr, to netip.AddrPort, data string, wait time.Duration) (answer string, answerFrom netip.AddrPort, err error) {
	err = InNamespace(ns, func() error {
		var laddr *net.UDPAddr
		if from.IsValid() {
			laddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0))
		}
		c, err := net.DialUDP("udp4", laddr, net.UDPAddrFromAddrPort(to))
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Write([]byte(data)); err != nil {
			return err
		}
		if wait == 0 {
			return nil
		}
		c.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, 2048)
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		answer, answerFrom = string(buf[:n]), c.RemoteAddr().(*net.UDPAddr).AddrPort()
		return nil
	})
	return answer, answerFrom, err
}

func (r *rig) expectConn(t testing.TB) *net.TCPConn {
	t.Helper()
	select {
	case c := <-r.conns:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection reached the proxy")
		return nil
	}
}

func (r *rig) expectNoConn(t testing.TB) {
	t.Helper()
	select {
	case c := <-r.conns:
		c.Close()
		t.Fatalf("connection from %s reached the proxy, want none", c.RemoteAddr())
	case <-time.After(quiet):
	}
}

func (r *rig) expectDNS(t testing.TB) datagram {
	t.Helper()
	select {
	case d := <-r.dns:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no datagram reached the resolver")
		return datagram{}
	}
}

func (r *rig) expectNoDNS(t testing.TB) {
	t.Helper()
	select {
	case d := <-r.dns:
		t.Fatalf("datagram %q from %s reached the resolver, want none", d.data, d.from)
	case <-time.After(quiet):
	}
}

// expectDropped fails unless err is a timeout: a packet the rules drop
// gets no answer, where a closed port would refuse at once.
func expectDropped(t testing.TB, what string, err error) {
	t.Helper()
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%s: got %v, want a timeout (dropped)", what, err)
	}
}

// expectNothing fails if anything arrives at c within quiet.
func expectNothing(t testing.TB, c net.PacketConn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(quiet))
	buf := make([]byte, 2048)
	n, from, err := c.ReadFrom(buf)
	if err == nil {
		t.Fatalf("datagram %q from %s arrived, want none", buf[:n], from)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("reading: %v", err)
	}
}

// tables lists the host's nft tables.
func tables(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables: %v: %s", err, out)
	}
	return string(out)
}
