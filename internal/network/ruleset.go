package network

import (
	"fmt"
	"strings"
)

// Each sandbox's DNS over UDP is bounded in packets, before anything else
// on the host sees them: the resolver reads every sandbox's queries from
// one socket, whose receive buffer a sandbox sending at line rate would
// fill, so that the kernel drops its neighbours' queries. The bound is
// well above the resolver's own per-sandbox rate (egress's
// DefaultDNSQueriesPerSecond, whose refusals are logged), so that the
// rule only ever meets a flood.
const (
	DNSPacketsPerSecond = 2000
	DNSPacketBurst      = 4000
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
//     another sandbox); then drop DNS over UDP past DNSPacketsPerSecond
//     (bursts of DNSPacketBurst) from that address, metered per address
//     in dns_flood, so one sandbox's flood neither fills the resolver's
//     socket nor conntrack;
//   - steer (nat): DNS to the resolver, every other TCP to the proxy;
//   - sandbox_in (input): accept only what steer redirected to those two
//     ports; drop the rest, ICMP and the host's other ports included;
//   - transit (forward): drop, both ways, so no sandbox reaches another
//     or the world directly.
//
// host_in keeps everyone else off the two ports while this server's
// services hold them (ServiceMark), and host_out lets the host send a
// sandbox only replies.
func (c Config) ruleset() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {}\ndelete table inet %[1]s\n", c.table())
	fmt.Fprintf(&b, `table inet %s {
	chain guard {
		type filter hook prerouting priority raw; policy accept;
		iifname "%[2]s*" jump from_sandbox
	}
	set dns_flood {
		type ipv4_addr
		flags dynamic
		timeout 1m
		size 65536
	}
	chain from_sandbox {
		iifgroup != %#[3]x drop
		meta nfproto != ipv4 drop
		fib saddr . iif oif missing drop
		udp dport 53 update @dns_flood { ip saddr limit rate over %[6]d/second burst %[7]d packets } drop
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
		tcp dport %[4]d socket mark %#[8]x drop
		meta l4proto { tcp, udp } th dport %[5]d socket mark %#[8]x drop
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
`, c.table(), c.ifPrefix(), onlineGroup, c.ProxyPort, c.DNSPort, DNSPacketsPerSecond, DNSPacketBurst, ServiceMark)
	return b.String()
}

// dropTable is the nft script that removes the table, present or not.
func (c Config) dropTable() string {
	return fmt.Sprintf("table inet %s {}\ndelete table inet %[1]s\n", c.table())
}
