// Package egress is everything a sandbox's traffic meets on its way out:
// the allow-list policy, the addresses that are never reachable, the DNS
// resolver that answers only allowed names, the TCP proxy that every
// connection of a sandbox is redirected to (it decides by TLS server name
// or HTTP Host, resolves names itself and connects only to addresses it
// resolved), the per-sandbox egress log, and the swapping of secret
// placeholders on HTTPS requests to the host a secret is bound to.
//
// It knows sandboxes only through the Directory interface below, which
// the manager implements; it must not import the manager, the backends or
// the HTTP API. It imports the standard library,
// golang.org/x/net/dns/dnsmessage, golang.org/x/crypto/cryptobyte,
// golang.org/x/time/rate and internal/backoff only.
//
// # Never reachable
//
// In every mode with internet these addresses are refused, as literals,
// as DNS answers and as original destinations (Blocklist):
//
//   - loopback: 127.0.0.0/8, ::1
//   - unspecified and "this network": 0.0.0.0/8, ::
//   - link-local, cloud metadata included: 169.254.0.0/16 (169.254.169.254),
//     fe80::/10
//   - private: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7 (AWS's
//     fd00:ec2::254 among them), fec0::/10
//   - shared (carrier NAT, some clouds' metadata): 100.64.0.0/10
//   - IETF protocol assignments (a cloud's metadata, 192.0.0.192):
//     192.0.0.0/24
//   - multicast: 224.0.0.0/4, ff00::/8; reserved and broadcast:
//     240.0.0.0/4 (255.255.255.255)
//   - IPv6 forms that carry an IPv4 address: IPv4-mapped (::ffff:a.b.c.d),
//     IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) are as
//     blocked as the IPv4 address they carry; 6to4 (2002::/16), Teredo
//     (2001::/32), local NAT64 (64:ff9b:1::/48) and discard (100::/64)
//     entirely
//   - every address of the host's own interfaces, read when checked
//     (cached for five seconds)
//   - benchmarking: 198.18.0.0/15, where tests put their upstreams
//   - the prefixes given in Config.Blocked: the sandboxes' own pool, so
//     that no sandbox reaches another
//
// Config.Permit (serve --egress-permit) takes prefixes off the fixed list
// (the tests permit 198.18.0.0/15; an operator, an internal service), never
// off the host's own addresses, loopback or Config.Blocked.
//
// # Limits
//
// A sandbox holds at most Config.MaxConns proxied connections at once
// (DNS over TCP included; default 1024): more are refused and logged with
// the reason "connection limit". A connection on which nothing moved
// either way for Config.IdleTimeout (default 10 minutes), or for a minute
// once one side has closed, is closed at both ends; so are all of a
// sandbox's connections when it ends (Proxy.Release). Its DNS queries are
// bounded by a rate and a concurrency (Config.DNSQueriesPerSecond, 1000;
// Config.DNSInflight, 64): past them REFUSED and logged. The accept and
// read loops retry every error but a closed socket (EMFILE, ENFILE, ...)
// after a backoff of 5 ms doubling to 1 s.
//
// # Decisions
//
// With internet off nothing gets through. The sandbox is then offline
// (package network): the packet rules drop all it sends before the
// resolver or the proxy sees it, so none of it is in its Log (the CLI's
// run and exec say instead that the network is off when a command failed
// on it). What still arrives, in the moment a policy turns off, is
// refused: every DNS query REFUSED and every connection closed, logged
// with the reason "internet off". Otherwise the proxy reads the connection's
// first bytes. A TLS ClientHello gives the server name, an HTTP/1.x
// request head the host (absolute-form target or Host, which must agree);
// something else is opaque TCP, and so is a connection on which the
// server speaks first (ssh, smtp). A client silent for 300 ms makes the
// proxy dial where opaque TCP may go and wait for either side: a late
// ClientHello or request head is still routed by its name.
//
//   - A name must pass the policy. The proxy resolves it itself (hosts
//     file, then the host's resolver), keeps the IPv4 addresses not
//     blocked, and connects to the first that answers on the original
//     port; the original destination is ignored, so a name the sandbox
//     resolved to an address of its choosing gets nowhere.
//   - An IP literal as server name or Host (also decimal, octal or hex
//     forms, IPv6, IPv4-mapped) is refused when the policy has an allow
//     list, unless an address entry of the list covers it (only netip's
//     own forms ever are); with internet and no allow list it is allowed
//     unless blocked.
//   - A TLS connection without a server name, or HTTP without a Host, is
//     refused when the policy has an allow list, unless an address entry
//     covers its original destination.
//   - Opaque TCP goes to its original destination only if an address
//     entry covers it, or the resolver handed that address to this
//     sandbox, in the last five minutes, for a name the policy still
//     allows (with no allow list: any address not blocked).
//   - A name the allow list does not name, where the list has address
//     entries (an address or a CIDR prefix), is resolved and reaches only
//     its addresses those entries cover, and the resolver answers it with
//     only those; a plain HTTP connection so opened is relayed only while
//     its upstream's address stays covered.
//
// No address entry opens a never-reachable address.
//
// Every decision is an Event in the sandbox's Log. A policy change applies
// to new connections and DNS queries, and to the next request on an HTTP
// connection; a spliced connection (TLS not terminated, opaque TCP) runs
// on until it closes.
//
// Plain HTTP is relayed request by request, not spliced: with an allow
// list every request on a connection must name the host the first one
// named, so a kept-alive connection cannot reach another name behind the
// same address. What the proxy cannot see it cannot check: inside TLS it
// does not terminate, the Host may differ from the server name (the
// connection still reaches only the server name's addresses), and opaque
// TCP is not examined after the decision (it reaches only the address
// handed out). Where it terminates TLS (hosts with secrets) a Host that
// differs from the server name is refused.
//
// # Secrets
//
// For a TLS connection whose server name matches the Host of one of the
// account's secrets (read at each request, so changes apply to live
// sandboxes), the proxy terminates TLS with a certificate from the
// installation's CA, offering HTTP/1.1 only (never HTTP/2, so no
// connection carries a second authority), and forwards each request over
// TLS to the real host, verifying its certificate against the system's
// roots and Config.ExtraRoots: a host with a bad certificate receives
// nothing. In the request headers only (never the target, query or body,
// and never on a request asking for a protocol upgrade) each placeholder
// of a secret bound to that host is replaced by its value. In the response,
// the literal value is turned back into the placeholder in the status
// line, headers and trailers, and in the body unless it is
// content-encoded. A transformed echo (compressed, base64, split across
// fields, hashed) cannot be caught: that is why a secret is bound only to
// a host its owner trusts. Plain HTTP is never swapped, nor is any other
// host's traffic.
package egress
