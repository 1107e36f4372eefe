package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestPolicyAllows(t *testing.T) {
	list := []string{"api.example.org", "*.Example.COM", "dot.example.net."}
	for _, tc := range []struct {
		name   string
		policy Policy
		host   string
		want   bool
	}{
		{"internet off", Policy{Allow: list}, "api.example.org", false},
		{"internet off, no list", Policy{}, "api.example.org", false},
		{"open", Policy{Internet: true}, "anything.example", true},
		{"open, empty name", Policy{Internet: true}, "", false},
		{"exact", Policy{Internet: true, Allow: list}, "api.example.org", true},
		{"exact, case and trailing dot", Policy{Internet: true, Allow: list}, "API.Example.org.", true},
		{"entry with trailing dot", Policy{Internet: true, Allow: list}, "dot.example.net", true},
		{"exact does not cover subdomains", Policy{Internet: true, Allow: list}, "x.api.example.org", false},
		{"wildcard", Policy{Internet: true, Allow: list}, "a.example.com", true},
		{"wildcard, deeper", Policy{Internet: true, Allow: list}, "a.b.example.com", true},
		{"wildcard, not its apex", Policy{Internet: true, Allow: list}, "example.com", false},
		{"wildcard, not a suffix lookalike", Policy{Internet: true, Allow: list}, "evilexample.com", false},
		{"wildcard, not a prefix", Policy{Internet: true, Allow: list}, "example.com.evil.org", false},
		{"denied", Policy{Internet: true, Allow: list}, "evil.org", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.Allows(tc.host); got != tc.want {
				t.Errorf("Allows(%q) = %v, want %v", tc.host, got, tc.want)
			}
		})
	}
}

func TestValidateAllow(t *testing.T) {
	for _, tc := range []struct {
		entry string
		ok    bool
	}{
		{"api.openai.com", true},
		{"*.example.org", true},
		{"localhost", true},
		{"_service.example.org", true},
		{"Example.ORG.", true},
		{"", false},
		{"*", false},
		{"*.", false},
		{"a.*.example.org", false},
		{"*example.org", false},
		{"**.example.org", false},
		{"example.*", false},
		{"example.org:443", false},
		{"1.2.3.4", true},
		{"10.1.0.0/16", true},
		{"10.1.2.3/16", true},
		{"1.2.3.4/33", false},
		{"2001:db8::/32", true},
		{"1.2.3.4:80", false},
		{"::1", true},
		{"[::1]", false},
		{"[::1]:443", false},
		{"::ffff:10.0.0.1", false},
		{"2130706433", false},
		{"0x7f000001", false},
		{"127.1", false},
		{"0177.0.0.1", false},
		{"*.10.0.0.1", false},
		{"-bad.example.org", false},
		{"a..b", false},
		{"exa mple.org", false},
		{"https://example.org", false},
		{"example.org/path", false},
		{strings.Repeat("a", 64) + ".org", false},
		{strings.Repeat("a.", 127) + "org", false},
	} {
		err := ValidateAllow([]string{"ok.example", tc.entry})
		if (err == nil) != tc.ok {
			t.Errorf("ValidateAllow(%q) = %v, want ok %v", tc.entry, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidAllow) {
			t.Errorf("ValidateAllow(%q) = %v, want it to wrap ErrInvalidAllow", tc.entry, err)
		}
	}
}

func TestBlocklist(t *testing.T) {
	b := NewBlocklist(netip.MustParsePrefix("198.19.128.0/24"))
	for _, tc := range []struct {
		addr    string
		blocked bool
	}{
		{"127.0.0.1", true},
		{"127.255.0.9", true},
		{"::1", true},
		{"0.0.0.0", true},
		{"::", true},
		{"169.254.169.254", true},
		{"fe80::1", true},
		{"10.1.2.3", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.168.1.1", true},
		{"100.64.0.1", true},
		{"100.100.100.200", true},
		{"192.0.0.192", true},
		{"fd00:ec2::254", true},
		{"fc00::1", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"ff02::1", true},
		{"255.255.255.255", true},
		{"240.0.0.1", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:10.0.0.1", true},
		{"::ffff:192.168.0.1", true},
		{"::ffff:100.64.0.1", true},
		{"::ffff:224.0.0.1", true},
		{"::10.0.0.1", true},
		{"64:ff9b::a9fe:a9fe", true},
		{"2002:a00:1::1", true},
		{"198.19.128.7", true}, // the extra prefix
		{"198.18.0.1", true},   // benchmarking: test upstreams only, with a permit
		{"198.19.0.1", true},
		{"8.8.8.8", false},
		{"172.32.0.1", false},
		{"100.128.0.1", false},
		{"::ffff:8.8.8.8", false},
		{"64:ff9b::808:808", false},
		{"2606:4700::1111", false},
	} {
		if got := b.Blocked(netip.MustParseAddr(tc.addr)); got != tc.blocked {
			t.Errorf("Blocked(%s) = %v, want %v", tc.addr, got, tc.blocked)
		}
	}
	if !b.Blocked(netip.Addr{}) {
		t.Error("the invalid address is not blocked")
	}
	t.Run("the host's own addresses", func(t *testing.T) {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			t.Skip(err)
		}
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			if !b.Blocked(p.Addr()) {
				t.Errorf("Blocked(%s) = false for an address of this host", p.Addr())
			}
		}
		// Even in a permitted prefix: a permit never opens the host.
		fake := NewBlocklist()
		fake.permit = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}
		fake.interfaceAddrs = func() ([]net.Addr, error) {
			return []net.Addr{&net.IPNet{IP: net.ParseIP("198.18.5.5"), Mask: net.CIDRMask(24, 32)}}, nil
		}
		if !fake.Blocked(netip.MustParseAddr("198.18.5.5")) || fake.Blocked(netip.MustParseAddr("198.18.5.6")) {
			t.Error("an interface address is not blocked, or its neighbour is")
		}
		fake.interfaceAddrs = func() ([]net.Addr, error) { return nil, errors.New("no") }
		fake.hostAddrs = nil
		if !fake.Blocked(netip.MustParseAddr("198.18.5.6")) {
			t.Error("with the interfaces unreadable, an address is not blocked: want failing closed")
		}
	})
	t.Run("loopback unblocked for tests", func(t *testing.T) {
		u := NewBlocklist()
		u.unblockLoopback = true
		for _, a := range []string{"127.0.0.1", "::1", "::ffff:127.0.0.1"} {
			if u.Blocked(netip.MustParseAddr(a)) {
				t.Errorf("Blocked(%s) = true with loopback unblocked", a)
			}
		}
		for _, a := range []string{"10.0.0.1", "169.254.169.254", "0.0.0.0"} {
			if !u.Blocked(netip.MustParseAddr(a)) {
				t.Errorf("Blocked(%s) = false with loopback unblocked", a)
			}
		}
	})
}

func TestParseHosts(t *testing.T) {
	h, err := ParseHosts(strings.NewReader("# c\n198.18.0.1 API.test. alias.test # tail\n\n198.18.0.2 api.test\n::ffff:198.18.0.3 v6.test\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := h["api.test"]; len(got) != 2 || got[0].String() != "198.18.0.1" || got[1].String() != "198.18.0.2" {
		t.Errorf("api.test: got %v", got)
	}
	if got := h["v6.test"]; len(got) != 1 || got[0].String() != "198.18.0.3" {
		t.Errorf("v6.test: got %v", got)
	}
	for _, bad := range []string{"198.18.0.1\n", "nonsense name.test\n", "198.18.0.1 bad_name!\n"} {
		if _, err := ParseHosts(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseHosts(%q) succeeded, want an error", bad)
		}
	}
}

func TestResolver(t *testing.T) {
	hosts := Hosts{
		"up.test":    {netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("2001:db8::1")},
		"inner.test": {netip.MustParseAddr("169.254.169.254")},
	}
	calls := 0
	permitted := NewBlocklist()
	permitted.permit = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}
	r := NewResolver(hosts, permitted, func(_ context.Context, name string) ([]netip.Addr, error) {
		calls++
		return []netip.Addr{netip.MustParseAddr("198.18.0.9"), netip.MustParseAddr("127.0.0.1")}, nil
	}, 0)
	ctx := t.Context()
	if got, err := r.Lookup(ctx, "UP.test."); err != nil || len(got) != 1 || got[0].String() != "198.18.0.1" {
		t.Errorf("hosts file: got %v %v, want only 198.18.0.1", got, err)
	}
	if _, err := r.Lookup(ctx, "inner.test"); !errors.Is(err, ErrNotFound) {
		t.Errorf("only blocked addresses: got %v, want ErrNotFound", err)
	}
	if got, err := r.Answer(ctx, "sb", "x.test"); err != nil || len(got) != 1 || got[0].String() != "198.18.0.9" {
		t.Errorf("host resolver: got %v %v", got, err)
	}
	r.Lookup(ctx, "x.test")
	if calls != 1 {
		t.Errorf("the host resolver was asked %d times, want 1 (cached)", calls)
	}
	if got := r.HandedOut("sb", netip.MustParseAddr("198.18.0.9")); len(got) != 1 || got[0] != "x.test" {
		t.Errorf("handed out: got %v, want x.test", got)
	}
	if got := r.HandedOut("other", netip.MustParseAddr("198.18.0.9")); len(got) != 0 {
		t.Errorf("handed out to another sandbox: got %v", got)
	}
	// A handout lasts its TTL to the nanosecond, on the bubble's clock
	// (testing/synctest), so that neither edge is a guess at a sleep.
	synctest.Test(t, func(t *testing.T) {
		short := NewResolver(hosts, permitted, nil, 20*time.Millisecond)
		short.Answer(t.Context(), "sb", "up.test")
		time.Sleep(20*time.Millisecond - time.Nanosecond)
		if got := short.HandedOut("sb", netip.MustParseAddr("198.18.0.1")); len(got) != 1 || got[0] != "up.test" {
			t.Errorf("just before the TTL: got %v, want up.test", got)
		}
		time.Sleep(time.Nanosecond)
		if got := short.HandedOut("sb", netip.MustParseAddr("198.18.0.1")); len(got) != 0 {
			t.Errorf("after the TTL: got %v, want nothing", got)
		}
	})
	r.Forget("sb")
	if got := r.HandedOut("sb", netip.MustParseAddr("198.18.0.9")); len(got) != 0 {
		t.Errorf("after Forget: got %v", got)
	}
}
