package egress

import (
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// sandboxes is a Directory of several sandboxes on loopback addresses
// (127.0.0.0/8 is all loopback), each with the internet on.
type sandboxes struct {
	mu sync.Mutex // guards by
	by map[netip.Addr]Sandbox
}

func (d *sandboxes) SandboxByAddr(a netip.Addr) (Sandbox, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sb, ok := d.by[a]
	return sb, ok
}

// dialFrom opens a connection through the proxy from address from and
// checks that a line makes the round trip.
func (e *env) dialFrom(t *testing.T, from string) net.Conn {
	t.Helper()
	c := e.tryFrom(t, from)
	if c == nil {
		t.Fatalf("a connection from %s was refused, want it through", from)
	}
	return c
}

// tryFrom opens a connection through the proxy from address from: nil if
// the proxy closed it without reaching the upstream.
func (e *env) tryFrom(t *testing.T, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp4", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "ping\n")
	buf := make([]byte, 6)
	if _, err := io.ReadFull(c, buf); err != nil {
		c.Close()
		return nil
	}
	if string(buf) != "+ping\n" {
		t.Fatalf("through the proxy from %s: got %q, want +ping", from, buf)
	}
	c.SetDeadline(time.Time{})
	return c
}

// wantRefusal waits for sandbox id's newest event to be a refusal whose
// reason contains part.
func (e *env) wantRefusal(t *testing.T, id, kind, part string) {
	t.Helper()
	var last Event
	for range 100 {
		if evs := e.p.Log().Events(id); len(evs) > 0 {
			last = evs[len(evs)-1]
			if last.Kind == kind && last.Verdict == Refused && strings.Contains(last.Reason, part) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("sandbox %s: last event %+v, want a %s refusal for %q", id, last, kind, part)
}

// TestAccountAndHostLimits: the connections of all an account's sandboxes
// together, and of every sandbox on the host, are bounded besides each
// sandbox's own; what is past a bound is closed before it reaches the
// upstream and logged, with the bound's name, in the sandbox's log.
func TestAccountAndHostLimits(t *testing.T) {
	dir := &sandboxes{by: map[netip.Addr]Sandbox{
		netip.MustParseAddr("127.0.0.1"): {ID: "a1", Account: "acct", Policy: Policy{Internet: true}},
		netip.MustParseAddr("127.0.0.2"): {ID: "a2", Account: "acct", Policy: Policy{Internet: true}},
		netip.MustParseAddr("127.0.0.3"): {ID: "b1", Account: "other", Policy: Policy{Internet: true}},
	}}
	e := newEnv(t, Policy{}, func(c *Config) {
		c.Directory = dir
		c.MaxConns, c.MaxConnsAccount, c.MaxConnsHost = 3, 4, 6
	})
	up := newHoldingUpstream(t)
	e.toAddr(up.addr)

	var a1 []net.Conn
	for range 3 {
		a1 = append(a1, e.dialFrom(t, "127.0.0.1"))
	}
	e.dialFrom(t, "127.0.0.2")
	// a2 has one of its own three, but its account has its four.
	if c := e.tryFrom(t, "127.0.0.2"); c != nil {
		t.Error("a connection past the account's limit went through")
	}
	e.wantRefusal(t, "a2", "tcp", "account connection limit (4 open)")

	// Another account has room of its own, up to the host's limit.
	e.dialFrom(t, "127.0.0.3")
	e.dialFrom(t, "127.0.0.3")
	if c := e.tryFrom(t, "127.0.0.3"); c != nil {
		t.Error("a connection past the host's limit went through")
	}
	e.wantRefusal(t, "b1", "tcp", "host connection limit (6 open)")
	// DNS over TCP holds a descriptor too.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
	dns, err := d.Dial("tcp4", e.dnsTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	if !closedByPeer(dns) {
		t.Error("a DNS-over-TCP connection past the host's limit is still open")
	}
	e.wantRefusal(t, "b1", "dns", "host connection limit")
	if got := up.openConns(); got != 6 {
		t.Errorf("the upstream holds %d connections, want 6", got)
	}

	// A connection that ends frees its slot in all three.
	a1[0].Close()
	waitFor(t, "the closed connection's slots are still taken", func() bool {
		acct, total := e.p.flows.counts("acct")
		return acct == 3 && total == 5
	})
	e.dialFrom(t, "127.0.0.3")

	// A sandbox that ends gives its account and the host their room back.
	e.p.Release("a1")
	waitFor(t, "the released sandbox's slots are still taken", func() bool {
		acct, total := e.p.flows.counts("acct")
		return acct == 1 && total == 4
	})
	e.dialFrom(t, "127.0.0.2")
	e.dialFrom(t, "127.0.0.2")
}

func TestFlowTableLimits(t *testing.T) {
	type open struct{ id, account, refusal string }
	for _, tc := range []struct {
		name  string
		lim   flowLimits
		opens []open
	}{
		{"sandbox", flowLimits{sandbox: 2}, []open{
			{"s1", "a", ""}, {"s1", "a", ""}, {"s1", "a", "connection limit (2 open)"}, {"s2", "a", ""},
		}},
		{"account", flowLimits{sandbox: 2, account: 3}, []open{
			{"s1", "a", ""}, {"s1", "a", ""}, {"s2", "a", ""}, {"s2", "a", "account connection limit (3 open)"}, {"s3", "b", ""},
		}},
		{"host", flowLimits{sandbox: 2, account: 3, host: 3}, []open{
			{"s1", "a", ""}, {"s2", "b", ""}, {"s3", "c", ""}, {"s4", "d", "host connection limit (3 open)"},
		}},
		{"no bounds", flowLimits{}, []open{{"s1", "a", ""}, {"s1", "a", ""}, {"s1", "a", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := newFlowTable(tc.lim)
			var flows []*flow
			for i, o := range tc.opens {
				f, refusal := ft.open(o.id, o.account, time.Hour)
				if refusal != o.refusal || (f == nil) != (o.refusal != "") {
					t.Fatalf("open %d (%s of %s): got %v %q, want refusal %q", i, o.id, o.account, f != nil, refusal, o.refusal)
				}
				if f != nil {
					flows = append(flows, f)
				}
			}
			for _, f := range flows {
				ft.done(f)
				ft.done(f) // twice frees nothing twice
			}
			if acct, total := ft.counts("a"); acct != 0 || total != 0 || len(ft.by) != 0 || len(ft.accounts) != 0 {
				t.Errorf("after every flow ended: got account %d, total %d, %d sandboxes, %d accounts; want none", acct, total, len(ft.by), len(ft.accounts))
			}
		})
	}
}

// TestTinyIdleTimeout: with an idle timeout of a nanosecond, the timer
// fires before newFlow is done with it; it must wait, not find no timer
// (which panicked the server).
func TestTinyIdleTimeout(t *testing.T) {
	ft := newFlowTable(flowLimits{})
	flows := make([]*flow, 2000)
	for i := range flows {
		flows[i], _ = ft.open("s1", "a", time.Nanosecond)
	}
	for _, f := range flows {
		waitFor(t, "a flow idle for a nanosecond is still open", func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.closed
		})
		ft.done(f)
	}
}

// TestCloseFlows: a sandbox that stops running without ending (a pause)
// loses its connections, both ends, but keeps what the proxy knows for it:
// an address handed to it still opens opaque TCP, unlike after Release.
func TestCloseFlows(t *testing.T) {
	e := newEnv(t, Policy{Internet: true, Allow: []string{"git.test"}})
	up := newHoldingUpstream(t)
	e.toAddr(up.addr)
	if rcode, addrs := e.query(t, "udp", "git.test", qA); rcode != 0 || len(addrs) != 1 {
		t.Fatalf("git.test: got rcode %d %v, want an address", rcode, addrs)
	}
	held := []net.Conn{e.dialProxy(t), e.dialProxy(t)}

	e.p.CloseFlows(sandboxID)
	for i, c := range held {
		if !closedByPeer(c) {
			t.Errorf("connection %d is still open after CloseFlows", i)
		}
	}
	waitFor(t, "upstream connections still open after CloseFlows", func() bool { return up.openConns() == 0 })
	waitFor(t, "the sandbox still holds connections after CloseFlows", func() bool { return e.p.Conns(sandboxID) == 0 })

	// Resumed, it reconnects to the address it was given.
	e.dialProxy(t)
	e.wantEvent("tcp", "git.test", Allowed, "")

	// Ended, it was given nothing any more.
	e.p.Release(sandboxID)
	if c := e.tryFrom(t, "127.0.0.1"); c != nil {
		t.Error("after Release, the handed-out address still opens opaque TCP")
	}
	e.wantEvent("tcp", "", Refused, "address not resolved for an allowed name")
}
