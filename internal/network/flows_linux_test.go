package network

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// sendFromPort sends one datagram from inside ns from a fixed source port.
func sendFromPort(t *testing.T, ns string, port int, to netip.AddrPort) {
	t.Helper()
	err := InNamespace(ns, func() error {
		c, err := net.DialUDP("udp4", &net.UDPAddr{Port: port}, net.UDPAddrFromAddrPort(to))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("query"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A sandbox address that a server frees and another takes must not keep
// the first server's redirects: a DNS query from the same source port
// reaches the second server's resolver.
func TestReusedAddressForgetsOldFlows(t *testing.T) {
	pool := testPool(t)
	first := newRig(t, pool)
	l1, ns1 := first.sandbox("sbxflows00000001")
	if err := first.p.SetOnline(l1, true); err != nil {
		t.Fatal(err)
	}
	sendFromPort(t, ns1, 5353, netip.AddrPortFrom(l1.HostAddr, 53))
	first.expectDNS(t)
	if err := first.p.Detach(l1); err != nil {
		t.Fatal(err)
	}
	RemoveNamespace(ns1)

	second := newRig(t, pool)
	l2, ns2 := second.sandbox("sbxflows00000002")
	if l2.SandboxAddr != l1.SandboxAddr {
		t.Skipf("the second sandbox got %s, not the freed %s", l2.SandboxAddr, l1.SandboxAddr)
	}
	if err := second.p.SetOnline(l2, true); err != nil {
		t.Fatal(err)
	}
	sendFromPort(t, ns2, 5353, netip.AddrPortFrom(l2.HostAddr, 53))
	second.expectDNS(t)
	select {
	case d := <-first.dns:
		t.Fatalf("the first server's resolver got %q: an old flow still steers the address", d.data)
	case <-time.After(200 * time.Millisecond):
	}
}
