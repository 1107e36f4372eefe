package network

import (
	"net/netip"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := Config{Name: "a1z", ProxyPort: 15001, DNSPort: 15053}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // "" for valid
	}{
		{"default pool", func(c *Config) {}, ""},
		{"own pool", func(c *Config) { c.Pool = netip.MustParsePrefix("198.18.4.0/24") }, ""},
		{"short name", func(c *Config) { c.Name = "ab" }, "exactly 3"},
		{"long name", func(c *Config) { c.Name = "abcd" }, "exactly 3"},
		{"upper case", func(c *Config) { c.Name = "aBc" }, "0-9 and a-z"},
		{"no proxy port", func(c *Config) { c.ProxyPort = 0 }, "out of range"},
		{"dns port too big", func(c *Config) { c.DNSPort = 65536 }, "out of range"},
		{"dns on 53", func(c *Config) { c.DNSPort = 53 }, "must not be 53"},
		{"same ports", func(c *Config) { c.DNSPort = c.ProxyPort }, "both"},
		{"ipv6 pool", func(c *Config) { c.Pool = netip.MustParsePrefix("fd00::/64") }, "IPv4"},
		{"pool too small", func(c *Config) { c.Pool = netip.MustParsePrefix("100.96.0.0/31") }, "/30 or wider"},
		{"pool host bits", func(c *Config) { c.Pool = netip.MustParsePrefix("100.96.0.1/24") }, "host bits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestHostIf(t *testing.T) {
	c := Config{Name: "x9k"}
	tests := []struct {
		id, want string
		err      bool
	}{
		{"sbx0123456789abcdef", "wx9k56789abcdef", false},
		{"short", "wx9kshort", false},
		{"exactly11ch", "wx9kexactly11ch", false},
		{"", "", true},
		{"a/b", "", true},
		{"a b", "", true},
		{"a:b", "", true},
	}
	for _, tt := range tests {
		got, err := c.hostIf(tt.id)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("hostIf(%q): got %q, %v, want %q (error %v)", tt.id, got, err, tt.want, tt.err)
		}
		if len(got) > maxIfName {
			t.Errorf("hostIf(%q) = %q: longer than %d", tt.id, got, maxIfName)
		}
	}
}

func TestSlots(t *testing.T) {
	s := newSlots(netip.MustParsePrefix("100.96.0.0/28"))
	host := newOccupied([]netip.Prefix{
		netip.MustParsePrefix("100.96.0.5/32"),  // another server's host end
		netip.MustParsePrefix("10.0.0.0/8"),     // elsewhere
		netip.MustParsePrefix("100.96.0.12/30"), // a /30 in use
	})
	var got []string
	for {
		p, ok := s.take(host.busy)
		if !ok {
			break
		}
		got = append(got, p.String())
	}
	if want := "100.96.0.0/30 100.96.0.8/30"; strings.Join(got, " ") != want {
		t.Fatalf("took %v, want %s", got, want)
	}
	s.free(netip.MustParsePrefix("100.96.0.8/30"))
	if p, _ := s.take(host.busy); p != netip.MustParsePrefix("100.96.0.8/30") {
		t.Errorf("after free: got %s, want 100.96.0.8/30", p)
	}
	wide := newOccupied([]netip.Prefix{netip.MustParsePrefix("100.64.0.0/10")})
	if p, ok := newSlots(DefaultPool).take(wide.busy); ok {
		t.Errorf("pool inside a host prefix: got %s, want none free", p)
	}
	h, sb := ends(netip.MustParsePrefix("100.96.0.8/30"))
	if h != netip.MustParseAddr("100.96.0.9") || sb != netip.MustParseAddr("100.96.0.10") {
		t.Errorf("ends: got %s %s, want 100.96.0.9 100.96.0.10", h, sb)
	}
}

func TestRuleset(t *testing.T) {
	rs := Config{Name: "abc", ProxyPort: 15001, DNSPort: 15053}.ruleset()
	for _, want := range []string{
		"delete table inet withruntime_abc",
		`iifname "wabc*" jump from_sandbox`,
		"th dport 53 redirect to :15053",
		"meta l4proto tcp redirect to :15001",
		"tcp dport 15001 ct status dnat accept",
		`oifname "wabc*" drop`,
		"udp dport 53 update @dns_flood { ip saddr limit rate over 2000/second burst 4000 packets } drop",
	} {
		if !strings.Contains(rs, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, rs)
		}
	}
}
