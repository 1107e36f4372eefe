package network

import (
	"fmt"
	"strings"
)

// onlineGroup is the interface group of the host end of a sandbox that may
// send. Every other group (a new interface is in group 0) is offline, so a
// sandbox can send nothing until it is put online.
const onlineGroup = 0x77720001

// ruleset is the nft script that (re)writes the server's table in one
// transaction. The first two lines make the delete succeed whether or not
// the table exists.
//
// Sandbox packets meet, in order:
//   - guard (prerouting, before conntrack): drop unless online, IPv4, and
//     from the address the host routes to that interface (no spoofing
//     another sandbox);
//   - steer (nat): DNS to the resolver, every other TCP to the proxy;
//   - sandbox_in (input): accept only what steer redirected to those two
//     ports; drop the rest, ICMP and the host's other ports included;
//   - transit (forward): drop, both ways, so no sandbox reaches another
//     or the world directly.
//
// host_in keeps everyone else off the two ports, and host_out lets the
// host send a sandbox only replies.
func (c Config) ruleset() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {}\ndelete table inet %[1]s\n", c.table())
	fmt.Fprintf(&b, `table inet %s {
	chain guard {
		type filter hook prerouting priority raw; policy accept;
		iifname "%[2]s*" jump from_sandbox
	}
	chain from_sandbox {
		iifgroup != %#[3]x drop
		meta nfproto != ipv4 drop
		fib saddr . iif oif missing drop
	}
	chain steer {
		type nat hook prerouting priority dstnat; policy accept;
		iifname != "%[2]s*" return
		meta l4proto { tcp, udp } th dport 53 redirect to :%[5]d
		meta l4proto tcp redirect to :%[4]d
	}
	chain host_in {
		type filter hook input priority filter; policy accept;
		iifname "%[2]s*" jump sandbox_in
		tcp dport %[4]d drop
		meta l4proto { tcp, udp } th dport %[5]d drop
	}
	chain sandbox_in {
		iifgroup != %#[3]x drop
		tcp dport %[4]d ct status dnat accept
		meta l4proto { tcp, udp } th dport %[5]d ct status dnat accept
		drop
	}
	chain transit {
		type filter hook forward priority filter; policy accept;
		iifname "%[2]s*" drop
		oifname "%[2]s*" drop
	}
	chain host_out {
		type filter hook output priority filter; policy accept;
		oifname "%[2]s*" ct state != { established, related } drop
	}
}
`, c.table(), c.ifPrefix(), onlineGroup, c.ProxyPort, c.DNSPort)
	return b.String()
}

// dropTable is the nft script that removes the table, present or not.
func (c Config) dropTable() string {
	return fmt.Sprintf("table inet %s {}\ndelete table inet %[1]s\n", c.table())
}
