package network

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// udpCounter reads a resolver's UDP socket, counting datagrams by source
// and answering those that start with "q" (queries; the flood is not
// answered).
type udpCounter struct {
	c  *net.UDPConn
	mu sync.Mutex // guards by
	by map[netip.Addr]int
}

func countUDP(c *net.UDPConn) *udpCounter {
	u := &udpCounter{c: c, by: map[netip.Addr]int{}}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			u.mu.Lock()
			u.by[from.Addr().Unmap()]++
			u.mu.Unlock()
			if n > 0 && buf[0] == 'q' {
				c.WriteToUDPAddrPort(append([]byte("re:"), buf[:n]...), from)
			}
		}
	}()
	return u
}

func (u *udpCounter) from(a netip.Addr) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.by[a]
}

// settled waits until nothing more arrives from a for quiet, and returns
// how many did.
func (u *udpCounter) settled(a netip.Addr) int {
	for n := u.from(a); ; {
		time.Sleep(quiet)
		m := u.from(a)
		if m == n {
			return n
		}
		n = m
	}
}

// socketDrops is how many datagrams the kernel dropped at the host's UDP
// socket on port for want of room in its receive buffer.
func socketDrops(t *testing.T, port int) int {
	t.Helper()
	suffix := fmt.Sprintf(":%04X", port)
	// This thread's view: /proc/net is the main thread's, whose
	// namespace need not be the host's in a test that enters others.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, table := range []string{"/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 12 && strings.HasSuffix(f[1], suffix) {
				n, err := strconv.Atoi(f[len(f)-1])
				if err != nil {
					t.Fatalf("%s: drops %q: %v", table, f[len(f)-1], err)
				}
				return n
			}
		}
	}
	t.Fatalf("/proc/net/udp: no socket on port %d", port)
	return 0
}

// floodFrom opens a UDP socket in namespace ns towards to.
func floodFrom(t *testing.T, ns string, to netip.AddrPort) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := InNamespace(ns, func() (err error) {
		c, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDNSFloodLimited: a sandbox sending DNS over UDP far faster than any
// resolver needs gets no more than DNSPacketBurst plus DNSPacketsPerSecond
// through to the host's socket, counted per sandbox: a neighbour's queries
// all pass during the flood, and the flooder's own pass again after it.
func TestDNSFloodLimited(t *testing.T) {
	t.Parallel()
	requiresPlumbing(t)
	proxy, err := net.ListenTCP("tcp4", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	udp, _ := resolverListeners(t)
	// Room for more than the flood itself: what passes the rules is
	// counted here, not lost to a full buffer.
	udp.SetReadBuffer(8 << 20)
	counter := countUDP(udp)
	r := &rig{t: t, conns: make(chan *net.TCPConn, 16), dns: make(chan datagram, 16)}
	r.cfg = Config{
		Name:      freshName(t),
		ProxyPort: proxy.Addr().(*net.TCPAddr).Port,
		DNSPort:   udp.LocalAddr().(*net.UDPAddr).Port,
		Pool:      testPool(t),
	}
	r.p = New(r.cfg)
	if err := r.p.Install(); err != nil {
		t.Fatalf("Install: %v", err)
	}
	t.Cleanup(func() { r.p.Uninstall() })
	a, nsA := r.sandbox("flooder")
	b, nsB := r.sandbox("neighbour")
	for _, l := range []Link{a, b} {
		if err := r.p.SetOnline(l, true); err != nil {
			t.Fatal(err)
		}
	}
	dnsA, dnsB := netip.AddrPortFrom(a.HostAddr, 53), netip.AddrPortFrom(b.HostAddr, 53)

	const flood = 20000
	dropsBefore := socketDrops(t, r.cfg.DNSPort)
	c := floodFrom(t, nsA, dnsA)
	sent, start := 0, time.Now()
	for range flood {
		if _, err := c.Write([]byte("flood")); err == nil {
			sent++
		}
	}
	elapsed := time.Since(start)
	passed := counter.settled(a.SandboxAddr) + socketDrops(t, r.cfg.DNSPort) - dropsBefore
	// Tokens accrue from the first packet to the last; half a second
	// more for packets still queued when the loop ended.
	bound := DNSPacketBurst + int(DNSPacketsPerSecond*(elapsed+500*time.Millisecond).Seconds())
	t.Logf("flood: sent %d in %v, %d passed the rules (bound %d)", sent, elapsed, passed, bound)
	if sent <= bound {
		t.Fatalf("the flood (%d datagrams in %v) was too slow to go past the rate", sent, elapsed)
	}
	if passed > bound {
		t.Errorf("%d of %d flood datagrams passed the rules, want at most %d", passed, sent, bound)
	}
	if passed < DNSPacketBurst/2 {
		t.Errorf("only %d of %d flood datagrams passed the rules, want at least the burst's half (%d)", passed, sent, DNSPacketBurst/2)
	}

	// The flood goes on; the neighbour's queries pass, each one.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				c.Write([]byte("flood"))
			}
		}
	}()
	for i := range 50 {
		q := fmt.Sprintf("q%d", i)
		answer, _, err := sendUDPFrom(nsB, netip.Addr{}, dnsB, q, 5*time.Second)
		if err != nil || answer != "re:"+q {
			t.Fatalf("the neighbour's query %d during the flood: got %q, %v; want its answer", i, answer, err)
		}
	}
	close(stop)
	wg.Wait()

	// A second's worth of tokens later, the flooder's own queries pass.
	time.Sleep(time.Second)
	if answer, _, err := sendUDPFrom(nsA, netip.Addr{}, dnsA, "q-after", 5*time.Second); err != nil || answer != "re:q-after" {
		t.Errorf("the flooder's query after the flood: got %q, %v; want its answer", answer, err)
	}
}
