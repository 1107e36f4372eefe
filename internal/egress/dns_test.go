package egress

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const (
	qA           = dnsmessage.TypeA
	qAAAA        = dnsmessage.TypeAAAA
	qTXT         = dnsmessage.TypeTXT
	rcodeRefused = dnsmessage.RCodeRefused
	rcodeNX      = dnsmessage.RCodeNameError
)

// query asks the proxy's DNS server (network "udp" or "tcp") from
// 127.0.0.1.
func (e *env) query(t *testing.T, network, name string, qtype dnsmessage.Type) (dnsmessage.RCode, []netip.Addr) {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4242, RecursionDesired: true})
	b.StartQuestions()
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: qtype, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return e.exchange(t, network, "127.0.0.1", msg)
}

// exchange sends a raw query from the address from.
func (e *env) exchange(t *testing.T, network, from string, msg []byte) (dnsmessage.RCode, []netip.Addr) {
	t.Helper()
	var resp []byte
	switch network {
	case "udp":
		c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(from), 0)), net.UDPAddrFromAddrPort(netip.MustParseAddrPort(e.dnsUDP)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 65535)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		resp = buf[:n]
	case "tcp":
		c, err := net.Dial("tcp4", e.dnsTCP)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		out := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
		if _, err := c.Write(append(out, msg...)); err != nil {
			t.Fatal(err)
		}
		var size [2]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatal(err)
		}
		resp = make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, resp); err != nil {
			t.Fatal(err)
		}
	}
	var p dnsmessage.Parser
	h, err := p.Start(resp)
	if err != nil {
		t.Fatal(err)
	}
	if h.ID != binary.BigEndian.Uint16(msg) || !h.Response {
		t.Fatalf("response header %+v does not answer the query", h)
	}
	p.SkipAllQuestions()
	var addrs []netip.Addr
	for {
		rh, err := p.AnswerHeader()
		if err != nil {
			break
		}
		if rh.Type != dnsmessage.TypeA || rh.TTL != 60 {
			t.Errorf("answer %+v, want A with TTL 60", rh)
		}
		a, err := p.AResource()
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, netip.AddrFrom4(a.A))
	}
	return h.RCode, addrs
}

// rawQuery is a query whose name is given label by label, unchecked.
func rawQuery(labels ...string) []byte {
	msg := []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range labels {
		msg = append(msg, byte(len(l)))
		msg = append(msg, l...)
	}
	return append(msg, 0, 0, 1, 0, 1)
}

func TestDNS(t *testing.T) {
	e := newEnv(t, Policy{Internet: true, Allow: []string{"plain.test", "*.far.test", "*.nowhere.test"}})
	loop := []netip.Addr{sandboxAddr}
	far := []netip.Addr{netip.MustParseAddr("198.18.0.7")}
	for _, tc := range []struct {
		name, network, qname string
		qtype                dnsmessage.Type
		rcode                dnsmessage.RCode
		addrs                []netip.Addr
		reason               string // of the event, if one is logged
		verdict              string // of that event; "": Refused
	}{
		{name: "hosts file over UDP", network: "udp", qname: "plain.test", qtype: qA, addrs: loop},
		{name: "hosts file over TCP", network: "tcp", qname: "plain.test", qtype: qA, addrs: loop},
		{name: "case and trailing dot", network: "udp", qname: "PLAIN.Test", qtype: qA, addrs: loop},
		{name: "host resolver", network: "udp", qname: "x.far.test", qtype: qA, addrs: far},
		{name: "AAAA is empty", network: "udp", qname: "plain.test", qtype: qAAAA},
		{name: "unknown name", network: "udp", qname: "x.nowhere.test", qtype: qA, rcode: rcodeNX, reason: "lookup failed: no such name", verdict: Allowed},
		{name: "unknown name over TCP", network: "tcp", qname: "y.nowhere.test", qtype: qA, rcode: rcodeNX, reason: "lookup failed: no such name", verdict: Allowed},
		{name: "denied name", network: "udp", qname: "evil.test", qtype: qA, rcode: rcodeRefused, reason: "name not allowed"},
		{name: "denied over TCP", network: "tcp", qname: "evil.test", qtype: qA, rcode: rcodeRefused, reason: "name not allowed"},
		{name: "denied AAAA", network: "udp", qname: "evil.test", qtype: qAAAA, rcode: rcodeRefused, reason: "name not allowed"},
		{name: "other type", network: "udp", qname: "plain.test", qtype: qTXT, rcode: rcodeRefused},
		{name: "wildcard apex", network: "udp", qname: "far.test", qtype: qA, rcode: rcodeRefused, reason: "name not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.p.Log().Events(sandboxID))
			rcode, addrs := e.query(t, tc.network, tc.qname, tc.qtype)
			if rcode != tc.rcode || fmt.Sprint(addrs) != fmt.Sprint(tc.addrs) {
				t.Errorf("got %v %v, want %v %v", rcode, addrs, tc.rcode, tc.addrs)
			}
			if tc.reason != "" {
				verdict := tc.verdict
				if verdict == "" {
					verdict = Refused
				}
				e.wantEvent("dns", normalize(tc.qname), verdict, tc.reason)
			} else if after := len(e.p.Log().Events(sandboxID)); after != before {
				t.Errorf("got %d new events, want none", after-before)
			}
		})
	}
	t.Run("label longer than 63", func(t *testing.T) {
		rcode, _ := e.exchange(t, "udp", "127.0.0.1", rawQuery(strings.Repeat("a", 64), "far", "test"))
		if rcode != rcodeRefused {
			t.Errorf("got %v, want REFUSED", rcode)
		}
		e.wantEvent("dns", "", Refused, "malformed")
	})
	t.Run("name longer than 253", func(t *testing.T) {
		l := strings.Repeat("a", 60)
		rcode, _ := e.exchange(t, "tcp", "127.0.0.1", rawQuery(l, l, l, l, l, "far", "test"))
		if rcode != rcodeRefused {
			t.Errorf("got %v, want REFUSED", rcode)
		}
		e.wantEvent("dns", "", Refused, "malformed")
	})
	t.Run("longest name and label", func(t *testing.T) {
		l := strings.Repeat("a", 63)
		name := l + "." + l + "." + l + "." + strings.Repeat("b", 52) + ".far.test"
		if len(name) != 253 {
			t.Fatalf("test name is %d bytes", len(name))
		}
		if rcode, addrs := e.query(t, "udp", name, qA); rcode != 0 || len(addrs) != 1 {
			t.Errorf("got %v %v, want an answer", rcode, addrs)
		}
	})
	t.Run("unknown source", func(t *testing.T) {
		before := len(e.p.Log().Events(sandboxID))
		rcode, _ := e.exchange(t, "udp", "127.0.0.3", rawQuery("plain", "test"))
		if rcode != rcodeRefused {
			t.Errorf("got %v, want REFUSED", rcode)
		}
		if after := len(e.p.Log().Events(sandboxID)); after != before {
			t.Errorf("got %d new events, want none", after-before)
		}
	})
}

func TestDNSFlood(t *testing.T) {
	// Past the rate limit only names count here (TestDNSLimits has the rate).
	e := newEnv(t, Policy{Internet: true}, func(c *Config) { c.DNSQueriesPerSecond = 1 << 20 })
	for i := range DefaultDNSNamesPerMinute - 1 {
		if rcode, _ := e.query(t, "udp", fmt.Sprintf("n%d.far.test", i), qA); rcode != 0 {
			t.Fatalf("name %d: got %v, want an answer", i, rcode)
		}
	}
	if rcode, _ := e.query(t, "udp", "plain.test", qA); rcode != 0 {
		t.Fatalf("name %d: got %v, want an answer", DefaultDNSNamesPerMinute, rcode)
	}
	if rcode, _ := e.query(t, "udp", "one-too-many.far.test", qA); rcode != rcodeRefused {
		t.Errorf("one name too many: got %v, want REFUSED", rcode)
	}
	e.wantEvent("dns", "one-too-many.far.test", Refused, "too many names")
	if rcode, _ := e.query(t, "tcp", "plain.test", qA); rcode != 0 {
		t.Errorf("a name already asked: got %v, want an answer", rcode)
	}
	// The count is per sandbox and per minute.
	if !e.p.names.allow(sandboxID, "later.far.test", time.Now().Add(time.Minute)) {
		t.Error("a minute later: refused, want allowed")
	}
	e.p.Forget(sandboxID)
	if rcode, _ := e.query(t, "udp", "after-forget.far.test", qA); rcode != 0 {
		t.Errorf("after Forget: got %v, want an answer", rcode)
	}
}

// TestDNSLookupFailure: an allowed name the host's resolver cannot answer
// gets SERVFAIL, one with only blocked addresses NXDOMAIN, and each is
// logged with a reason that names nothing of the host's resolver.
func TestDNSLookupFailure(t *testing.T) {
	e := newEnv(t, Policy{Internet: true, Allow: []string{"*.broken.test", "*.slow.test", "*.blocked.test"}}, func(c *Config) {
		c.Lookup = func(ctx context.Context, name string) ([]netip.Addr, error) {
			switch {
			case strings.HasSuffix(name, ".blocked.test"):
				return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
			case strings.HasSuffix(name, ".slow.test"):
				return nil, &net.DNSError{Err: "i/o timeout", Name: name, Server: "10.9.9.9:53", IsTimeout: true}
			}
			return nil, &net.DNSError{Err: "server misbehaving", Name: name, Server: "10.9.9.9:53"}
		}
	})
	for _, tc := range []struct {
		name   string
		rcode  dnsmessage.RCode
		reason string
	}{
		{"a.broken.test", dnsmessage.RCodeServerFailure, "lookup failed: server misbehaving"},
		{"a.slow.test", dnsmessage.RCodeServerFailure, "lookup failed: timed out"},
		{"metadata.blocked.test", rcodeNX, "lookup failed: only blocked or IPv6 addresses"},
	} {
		if rcode, addrs := e.query(t, "udp", tc.name, qA); rcode != tc.rcode || len(addrs) != 0 {
			t.Errorf("%s: got %v %v, want %v", tc.name, rcode, addrs, tc.rcode)
		}
		e.wantEvent("dns", tc.name, Allowed, tc.reason)
		if ev := e.lastEvent(); strings.Contains(ev.Reason, "10.9.9.9") || ev.Port != 53 {
			t.Errorf("%s: got event %+v, want port 53 and no resolver address", tc.name, ev)
		}
	}
}
