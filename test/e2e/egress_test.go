package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/testenv"
)

// Answers of probe.py.
type (
	dnsAnswer struct {
		Rcode   string
		Answers []string
		Error   string
	}
	udpAnswer struct {
		Sent      bool
		Reply     *string
		ReplyFrom string `json:"reply_from"`
		Error     string
	}
	tcpAnswer struct {
		Connected bool
		Data      string
		Error     string
	}
	httpAnswer struct {
		Responses []httpResponse
	}
	httpResponse struct {
		Status  int
		Headers map[string]string
		Body    string
		Alpn    *string
		Error   string
	}
	floodAnswer struct {
		NoError              int `json:"NOERROR"`
		Refused              int `json:"REFUSED"`
		Other                int `json:"other"`
		FirstRefused         int `json:"first_refused"`
		AnsweredAfterRefusal int `json:"answered_after_refusal"`
	}
)

// hostAddr is an IPv4 address of the host's interface that carries its
// default route, or "": one of "the host's own addresses" (a destination
// here only for sandboxes, whose packets to it the platform redirects to
// its proxy and refuses).
func hostAddr(t *testing.T) string {
	t.Helper()
	routes, err := network.CompleteDump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst != nil && r.Dst.String() != "0.0.0.0/0" {
			continue
		}
		link, err := netlink.LinkByIndex(r.LinkIndex)
		if err != nil {
			continue
		}
		addrs, _ := network.CompleteDump(func() ([]netlink.Addr, error) { return netlink.AddrList(link, netlink.FAMILY_V4) })
		for _, a := range addrs {
			if a.IP.IsGlobalUnicast() {
				return a.IP.String()
			}
		}
	}
	return ""
}

// hostAddr6 is a global IPv6 address of the host, or "".
func hostAddr6() string {
	addrs, _ := network.CompleteDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V6) })
	for _, a := range addrs {
		if a.IP.IsGlobalUnicast() {
			return a.IP.String()
		}
	}
	return ""
}

// TestEgress covers a sandbox's network policy from inside real sandboxes,
// against upstreams of the test's own in a network namespace. Every
// program here connects directly, ignoring any proxy variable (the
// sandboxes have none): what holds, holds for programs that ignore them.
func TestEgress(t *testing.T) { forIsolations(t, testEgress) }

func testEgress(t *testing.T, isolation string, flags ...string) {
	u := newUpstreams(t)
	s := testenv.StartServer(t, append(u.serverFlags(), flags...)...)
	r := &recorder{s: s, isolation: isolation}
	const allowJSON = `{"internet":true,"allow":["allowed.example.test","*.wild.example.test"]}`
	allow := newBox(t, r, allowJSON, u.CAPEM)
	off := newBox(t, r, `{"internet":false}`, u.CAPEM)
	open := newBox(t, r, `{"internet":true}`, u.CAPEM)

	var ns struct{ Nameserver string }
	allow.probe(t, &ns, "nameserver")
	gateway := ns.Nameserver // the sandbox's host end: the host itself
	openAddr := strings.TrimSpace(open.sh(t, "ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1").Out)
	if net.ParseIP(gateway) == nil || net.ParseIP(openAddr) == nil {
		t.Fatalf("gateway %q, other sandbox's address %q", gateway, openAddr)
	}

	// nothingAt fails if any connection, datagram or request reached addr
	// (an address, or address:port) since mark.
	nothingAt := func(t *testing.T, mark int, addr string) {
		t.Helper()
		settle()
		if got := u.arrivalsSince(mark, "", addr); len(got) > 0 {
			t.Fatalf("%s received %+v, want nothing", addr, got)
		}
	}
	// noRequestAt fails if an HTTP request reached addr since mark.
	noRequestAt := func(t *testing.T, mark int, addr string) {
		t.Helper()
		settle()
		if got := u.requestsSince(mark, at(addr)); len(got) > 0 {
			t.Fatalf("%s received requests %+v, want none", addr, got)
		}
	}
	// oneRequest expects exactly one request since mark, at addr.
	oneRequest := func(t *testing.T, mark int, addr string) request {
		t.Helper()
		got := u.requestsSince(mark, nil)
		if len(got) != 1 || got[0].Addr != addr {
			t.Fatalf("upstreams received %+v, want one request at %s", got, addr)
		}
		return got[0]
	}
	dns := func(t *testing.T, b *box, server, name string, opts ...string) dnsAnswer {
		t.Helper()
		var a dnsAnswer
		b.probe(t, &a, append([]string{"dns", server, name}, opts...)...)
		return a
	}

	t.Run("no proxy variables: every program connects directly", func(t *testing.T) {
		for _, b := range []*box{allow, off, open} {
			b.noProxyVariables(t)
		}
	})

	t.Run("allowed host over HTTPS passes through untouched", func(t *testing.T) {
		m, lm := u.mark(), allow.logMark(t)
		st, res := allow.curl(t, "--cacert /workspace/test-ca.pem https://allowed.example.test/")
		if st != "200" || res.Code != 0 || !strings.Contains(res.Out, "hello from allowed.example.test over https at "+upAllowed) {
			t.Fatalf("got %s %s", st, res)
		}
		req := oneRequest(t, m, upAllowed)
		if req.SNI != "allowed.example.test" || req.Host != "allowed.example.test" || req.Scheme != "https" {
			t.Fatalf("upstream saw %+v", req)
		}
		ev := allow.expectEvent(t, lm, "allowed.example.test", "allowed", "")
		if ev.Kind != "tls" || ev.Address != upAllowed || ev.Port != 443 {
			t.Fatalf("egress event %+v", ev)
		}
		// The certificate the sandbox sees is the upstream's own, from the
		// test CA: without it curl does not trust the connection, so the
		// proxy did not terminate TLS.
		if st, res := allow.curl(t, "https://allowed.example.test/"); res.Code != 60 {
			t.Fatalf("without the test CA: got %s %s, want curl's exit 60 (certificate not trusted)", st, res)
		}
	})

	t.Run("allowed host over HTTP, on any port", func(t *testing.T) {
		for _, url := range []string{"http://allowed.example.test/", "http://allowed.example.test:8080/"} {
			m, lm := u.mark(), allow.logMark(t)
			st, res := allow.curl(t, url)
			if st != "200" || !strings.Contains(res.Out, "hello from allowed.example.test") || !strings.Contains(res.Out, "over http at") {
				t.Fatalf("%s: got %s %s", url, st, res)
			}
			oneRequest(t, m, upAllowed)
			if ev := allow.expectEvent(t, lm, "allowed.example.test", "allowed", ""); ev.Kind != "http" || ev.Address != upAllowed {
				t.Fatalf("egress event %+v", ev)
			}
		}
	})

	t.Run("wildcard allows names under it, not the name itself", func(t *testing.T) {
		m := u.mark()
		st, res := allow.curl(t, "--cacert /workspace/test-ca.pem https://a.wild.example.test/")
		if st != "200" || !strings.Contains(res.Out, "hello from a.wild.example.test over https") {
			t.Fatalf("a.wild: got %s %s", st, res)
		}
		st, res = allow.curl(t, "http://b.c.wild.example.test/")
		if st != "200" || !strings.Contains(res.Out, "hello from b.c.wild.example.test over http") {
			t.Fatalf("b.c.wild: got %s %s", st, res)
		}
		if got := u.requestsSince(m, at(upWild)); len(got) != 2 {
			t.Fatalf("wild upstream received %+v, want two requests", got)
		}

		m, lm := u.mark(), allow.logMark(t)
		if a := dns(t, allow, "resolver", "wild.example.test"); a.Rcode != "REFUSED" {
			t.Fatalf("DNS for wild.example.test: %+v, want REFUSED", a)
		}
		if _, res := allow.curl(t, "http://wild.example.test/"); res.Code != 6 {
			t.Fatalf("curl wild.example.test: %s, want exit 6 (not resolved)", res)
		}
		// Even with the address given by the sandbox, the proxy refuses the
		// name.
		st, res = allow.curl(t, "--resolve wild.example.test:80:"+upWild+" http://wild.example.test/")
		if st != "502" || !strings.Contains(res.Out, "name not allowed") {
			t.Fatalf("wild.example.test through --resolve: got %s %s, want 502", st, res)
		}
		st, res = allow.curl(t, "--cacert /workspace/test-ca.pem --resolve wild.example.test:443:"+upWild+" https://wild.example.test/")
		if res.Code == 0 {
			t.Fatalf("wild.example.test over TLS through --resolve: got %s %s, want a failure", st, res)
		}
		noRequestAt(t, m, upWild)
		allow.expectEvent(t, lm, "wild.example.test", "refused", "name not allowed")
		allow.expectNoAllowed(t, lm, "wild.example.test")
	})

	t.Run("denied host is refused on every port", func(t *testing.T) {
		m, lm := u.mark(), allow.logMark(t)
		if res := allow.sh(t, "getent hosts denied.example.test"); res.Code == 0 {
			t.Fatalf("getent resolved a denied name: %s", res)
		}
		if a := dns(t, allow, "resolver", "denied.example.test"); a.Rcode != "REFUSED" || len(a.Answers) > 0 {
			t.Fatalf("DNS for denied.example.test: %+v, want REFUSED", a)
		}
		for _, target := range []string{
			"--resolve denied.example.test:80:" + upDenied + " http://denied.example.test/",
			"--resolve denied.example.test:8080:" + upDenied + " http://denied.example.test:8080/",
			"--cacert /workspace/test-ca.pem --resolve denied.example.test:443:" + upDenied + " https://denied.example.test/",
			"--cacert /workspace/test-ca.pem --resolve denied.example.test:8443:" + upDenied + " https://denied.example.test:8443/",
		} {
			st, res := allow.curl(t, target)
			if st == "200" || (res.Code == 0 && st != "502") {
				t.Fatalf("curl %s: got %s %s, want a refusal", target, st, res)
			}
		}
		var tc tcpAnswer
		allow.probe(t, &tc, "tcp", upDenied, "22")
		if tc.Data != "" {
			t.Fatalf("opaque TCP to the denied host got %q", tc.Data)
		}
		nothingAt(t, m, upDenied)
		allow.expectEvent(t, lm, "denied.example.test", "refused", "name not allowed")
		allow.expectNoAllowed(t, lm, "denied.example.test")
		allow.expectNoAllowed(t, lm, upDenied)
	})

	t.Run("IP literals are refused with an allow list", func(t *testing.T) {
		m, lm := u.mark(), allow.logMark(t)
		for _, target := range []string{
			"http://" + upAllowed + "/",
			"http://3323088130/", // 198.18.77.2 as one decimal number
			"http://0306.022.0115.02/",
			"http://0xc6124d02/",
			"http://[::ffff:198.18.77.2]/",
			"http://[::ffff:c612:4d02]/",
			// Literals in the Host only, on a connection to an allowed
			// name's address.
			"-H 'Host: 3323088130' http://allowed.example.test/",
			"-H 'Host: 0306.022.0115.02' http://allowed.example.test/",
			"-H 'Host: [::ffff:198.18.77.2]' http://allowed.example.test/",
		} {
			st, res := allow.curl(t, target)
			// Dotted ones are not in the list; other numeric spellings
			// are refused as such.
			if st != "502" || !strings.Contains(res.Out, "IP literal") {
				t.Fatalf("curl %s: got %s %s, want 502 IP literal", target, st, res)
			}
		}
		// TLS to a literal carries no server name.
		if st, res := allow.curl(t, "--cacert /workspace/test-ca.pem https://"+upAllowed+"/"); res.Code == 0 {
			t.Fatalf("TLS to an IP literal: got %s %s", st, res)
		}
		noRequestAt(t, m, upAllowed)
		allow.expectEvent(t, lm, upAllowed, "refused", "IP literal not in the allow list")
		allow.expectEvent(t, lm, upAllowed, "refused", "no server name")
		allow.expectEvent(t, lm, "3323088130", "refused", "IP literal")
		allow.expectNoAllowed(t, lm, upAllowed)
	})

	// Link-local and metadata, private and shared ranges, the host's own
	// addresses (its uplink, the end of the upstreams' veth, the
	// sandbox's gateway) and another sandbox: every TCP to them is
	// redirected to the proxy and refused there, in both modes with
	// internet; nothing leaves.
	blocked := []string{"169.254.169.254", "10.0.0.1", "172.16.0.1", "192.168.0.1", "100.64.0.1", "192.0.0.192",
		upRoot, gateway, openAddr}
	if a := hostAddr(t); a != "" {
		blocked = append(blocked, a)
	}
	t.Run("blocked ranges, the host and other sandboxes", func(t *testing.T) {
		for _, b := range []*box{allow, open} {
			lm := b.logMark(t)
			for _, a := range blocked {
				if a == openAddr && b == open {
					continue
				}
				wantReason := "blocked address"
				if b == allow {
					wantReason = "IP literal not in the allow list"
				}
				st, res := b.curl(t, "http://"+a+"/")
				if st != "502" || !strings.Contains(res.Out, wantReason) {
					t.Fatalf("curl http://%s/: got %s %s, want 502 %s", a, st, res, wantReason)
				}
				b.expectEvent(t, lm, a, "refused", wantReason)
				var tc tcpAnswer
				b.probe(t, &tc, "tcp", a, "22")
				if tc.Data != "" {
					t.Fatalf("opaque TCP to %s got %q", a, tc.Data)
				}
				ev := b.expectEvent(t, lm, a, "refused", "blocked address")
				if ev.Kind != "tcp" && ev.Kind != "http" {
					t.Fatalf("event %+v", ev)
				}
				b.expectNoAllowed(t, lm, a)
			}
			// Loopback is the sandbox's own: it never leaves the sandbox.
			if _, res := b.curl(t, "http://127.0.0.1/"); res.Code != 7 {
				t.Fatalf("127.0.0.1: %s, want curl exit 7 (connection refused inside the sandbox)", res)
			}
			b.expectNoAllowed(t, lm, "127.0.0.1")
			// A sandbox has no IPv6: the host's own IPv6 address is not
			// even routable from inside.
			if a6 := hostAddr6(); a6 != "" {
				if st, res := b.curl(t, "http://["+a6+"]/"); res.Code == 0 || st != "000" {
					t.Fatalf("http://[%s]/: got %s %s, want no connection", a6, st, res)
				}
			}
		}
	})

	t.Run("a name that resolves to a blocked address", func(t *testing.T) {
		lm := open.logMark(t)
		if a := dns(t, open, "resolver", "metadata.example.test"); a.Rcode != "NXDOMAIN" || len(a.Answers) > 0 {
			t.Fatalf("DNS for a name of 169.254.169.254: %+v, want NXDOMAIN", a)
		}
		m := u.mark()
		st, res := open.curl(t, "--resolve metadata.example.test:80:"+upAllowed+" http://metadata.example.test/")
		if st != "502" || !strings.Contains(res.Out, "no usable address") {
			t.Fatalf("got %s %s", st, res)
		}
		noRequestAt(t, m, upAllowed)
		open.expectEvent(t, lm, "metadata.example.test", "refused", "no usable address")
	})

	t.Run("UDP, QUIC and ICMP never arrive", func(t *testing.T) {
		m := u.mark()
		// A datagram, a QUIC Initial's first bytes on 443, and echo
		// requests from root in the sandbox (gVisor refuses raw sockets, so
		// they go out through an ICMP datagram socket), all at once.
		const quic = "c300000001" + "08" + "0102030405060708" + "00" + "00" + "4400" + "00"
		cmd := "p=/workspace/probe.py; (python3 $p udp " + upAllowed + " 9999 > /workspace/u1 &" +
			" python3 $p udp " + upAllowed + " 443 hex=" + quic + " > /workspace/u2 &" +
			" sudo python3 $p icmp " + upAllowed + " > /workspace/u3 &" +
			" sudo python3 $p icmp " + gateway + " > /workspace/u4 & wait); cat /workspace/u1 /workspace/u2 /workspace/u3 /workspace/u4"
		for _, b := range []*box{allow, open, off} {
			res := b.sh(t, cmd)
			lines := strings.Split(strings.TrimSpace(res.Out), "\n")
			if len(lines) != 4 {
				t.Fatalf("probes: %s", res)
			}
			for i, line := range lines {
				var a udpAnswer
				if json.Unmarshal([]byte(line), &a) != nil || !a.Sent || a.Reply != nil || a.ReplyFrom != "" {
					t.Fatalf("probe %d: %s, want sent and unanswered", i+1, line)
				}
			}
		}
		nothingAt(t, m, upAllowed+":9999")
		nothingAt(t, m, upAllowed+":443")
		if got := u.arrivalsSince(m, "icmp", ""); len(got) > 0 {
			t.Fatalf("ICMP reached the upstreams: %+v", got)
		}
		if got := u.arrivalsSince(m, "udp", ""); len(got) > 0 {
			t.Fatalf("UDP reached the upstreams: %+v", got)
		}
	})

	t.Run("DNS to an outside resolver is answered by the platform's", func(t *testing.T) {
		m, lm := u.mark(), allow.logMark(t)
		for _, tcp := range []string{"tcp=0", "tcp=1"} {
			a := dns(t, allow, upAllowed, "allowed.example.test", tcp)
			if a.Rcode != "NOERROR" || len(a.Answers) != 1 || a.Answers[0] != upAllowed {
				t.Fatalf("%s: allowed name through %s: %+v, want the platform's answer", tcp, upAllowed, a)
			}
			if a := dns(t, allow, upDecoy, "denied.example.test", tcp); a.Rcode != "REFUSED" {
				t.Fatalf("%s: denied name through %s: %+v, want REFUSED", tcp, upDecoy, a)
			}
			// Types that carry data (TXT) are refused.
			if a := dns(t, allow, upAllowed, "allowed.example.test", tcp, "type=16"); a.Rcode != "REFUSED" {
				t.Fatalf("%s: TXT: %+v, want REFUSED", tcp, a)
			}
		}
		nothingAt(t, m, upAllowed+":53")
		nothingAt(t, m, upDecoy)
		if ev := allow.expectEvent(t, lm, "denied.example.test", "refused", "name not allowed"); ev.Kind != "dns" {
			t.Fatalf("egress event %+v", ev)
		}
	})

	t.Run("DNS tunnels: long labels", func(t *testing.T) {
		lm := allow.logMark(t)
		label63 := strings.Repeat("x", 63)
		for _, name := range []string{
			label63 + ".allowed.example.test",
			label63 + ".denied.example.test",
			strings.Repeat("y", 64) + ".a.wild.example.test",
			strings.Repeat(label63+".", 4) + "wild.example.test", // over 253 bytes
		} {
			if a := dns(t, allow, "resolver", name); a.Rcode != "REFUSED" || len(a.Answers) > 0 {
				t.Fatalf("%s...: %+v, want REFUSED", name[:70], a)
			}
		}
		allow.expectEvent(t, lm, label63+".allowed.example.test", "refused", "name not allowed")
		allow.expectEvent(t, lm, label63+".denied.example.test", "refused", "name not allowed")
		allow.expectEvent(t, lm, "", "refused", "malformed query")
	})

	t.Run("a TLS server name that differs from the Host passes only to the server name", func(t *testing.T) {
		// The proxy does not terminate TLS for a host without secrets, so
		// it cannot see the Host inside; the connection still reaches only
		// the server name's address. (With a secret it terminates and
		// refuses: TestSecrets.)
		m := u.mark()
		st, res := allow.curl(t, "--cacert /workspace/test-ca.pem -H 'Host: denied.example.test' https://allowed.example.test/")
		if st != "200" {
			t.Fatalf("got %s %s", st, res)
		}
		req := oneRequest(t, m, upAllowed)
		if req.SNI != "allowed.example.test" {
			t.Fatalf("upstream saw %+v", req)
		}
		nothingAt(t, m, upDenied)
	})

	t.Run("plain HTTP naming a denied host on an allowed address", func(t *testing.T) {
		m, lm := u.mark(), allow.logMark(t)
		st, res := allow.curl(t, "-H 'Host: denied.example.test' http://allowed.example.test/")
		if st != "502" || !strings.Contains(res.Out, "name not allowed") {
			t.Fatalf("Host: denied: got %s %s", st, res)
		}
		st, res = allow.curl(t, "--request-target http://denied.example.test/ http://allowed.example.test/")
		if st != "502" {
			t.Fatalf("absolute target denied, Host allowed: got %s %s", st, res)
		}
		// A second request on a kept-alive connection to another (even
		// allowed) name.
		var h httpAnswer
		allow.probe(t, &h, "http", "allowed.example.test", "80", "0", "",
			`[{"host":"allowed.example.test","path":"/one"},{"host":"a.wild.example.test","path":"/two"},{"host":"denied.example.test","path":"/three"}]`)
		if len(h.Responses) < 2 || h.Responses[0].Status != 200 || h.Responses[1].Status != 502 {
			t.Fatalf("kept-alive connection: %+v", h)
		}
		got := u.requestsSince(m, nil)
		if len(got) != 1 || got[0].Path != "/one" {
			t.Fatalf("upstreams received %+v, want only /one", got)
		}
		nothingAt(t, m, upDenied)
		allow.expectEvent(t, lm, "denied.example.test", "refused", "name not allowed")
		allow.expectEvent(t, lm, "a.wild.example.test", "refused", "Host differs from the connection's first request")

		// CONNECT to an allowed name's address opens no tunnel, to a
		// denied name or an allowed one.
		m, lm = u.mark(), allow.logMark(t)
		for _, target := range []string{"https://denied.example.test/", "https://a.wild.example.test/"} {
			st, res := allow.curl(t, "-p -x http://allowed.example.test:80 --resolve denied.example.test:443:"+upDenied+" --cacert /workspace/test-ca.pem "+target)
			if res.Code == 0 || st == "200" {
				t.Fatalf("CONNECT for %s: got %s %s", target, st, res)
			}
		}
		noRequestAt(t, m, upAllowed)
		noRequestAt(t, m, upWild)
		nothingAt(t, m, upDenied)
		allow.expectEvent(t, lm, "a.wild.example.test", "refused", "CONNECT")
	})

	t.Run("a name resolved by the sandbox to an address of its choosing", func(t *testing.T) {
		m, lm := u.mark(), allow.logMark(t)
		st, res := allow.curl(t, "--cacert /workspace/test-ca.pem --resolve allowed.example.test:443:"+upDecoy+" https://allowed.example.test/")
		if st != "200" || !strings.Contains(res.Out, "at "+upAllowed) {
			t.Fatalf("HTTPS: got %s %s", st, res)
		}
		st, res = allow.curl(t, "--resolve allowed.example.test:80:"+upDecoy+" http://allowed.example.test/")
		if st != "200" || !strings.Contains(res.Out, "at "+upAllowed) {
			t.Fatalf("HTTP: got %s %s", st, res)
		}
		// The same through the sandbox's own /etc/hosts, as root.
		res = allow.sh(t, "echo '"+upDecoy+" allowed.example.test' | sudo tee -a /etc/hosts >/dev/null && getent hosts allowed.example.test && curl -sS -m 10 http://allowed.example.test/; sudo sed -i '/allowed.example.test/d' /etc/hosts")
		if !strings.Contains(res.Out, upDecoy+" ") || !strings.Contains(res.Out, "at "+upAllowed) {
			t.Fatalf("/etc/hosts: %s", res)
		}
		if got := u.requestsSince(m, at(upAllowed)); len(got) != 3 {
			t.Fatalf("allowed upstream received %+v, want 3 requests", got)
		}
		nothingAt(t, m, upDecoy)
		allow.expectNoAllowed(t, lm, upDecoy)
		for _, ev := range events(allow.egress(t), lm, func(e api.EgressEvent) bool { return e.Verdict == "allowed" && e.Kind != "dns" }) {
			if ev.Address != upAllowed {
				t.Fatalf("allowed connection to %s: %+v", ev.Address, ev)
			}
		}
	})

	t.Run("a redirect from an allowed host to a denied one", func(t *testing.T) {
		m, lm := u.mark(), allow.logMark(t)
		st, res := allow.curl(t, "-L --cacert /workspace/test-ca.pem https://allowed.example.test/redirect")
		if res.Code == 0 {
			t.Fatalf("curl -L: got %s %s, want a failure at the second hop", st, res)
		}
		st, res = allow.curl(t, "-L --cacert /workspace/test-ca.pem --resolve denied.example.test:443:"+upDenied+" https://allowed.example.test/redirect")
		if res.Code == 0 {
			t.Fatalf("curl -L with the denied host's address: got %s %s, want a failure", st, res)
		}
		st, res = allow.curl(t, "-L --resolve denied.example.test:80:"+upDenied+" 'http://allowed.example.test/redirect?to=http://denied.example.test/'")
		if st != "502" {
			t.Fatalf("curl -L over HTTP: got %s %s, want 502 at the second hop", st, res)
		}
		if got := u.requestsSince(m, at(upAllowed)); len(got) != 3 || got[0].Path != "/redirect" {
			t.Fatalf("first hop: %+v", got)
		}
		nothingAt(t, m, upDenied)
		allow.expectEvent(t, lm, "denied.example.test", "refused", "")
		allow.expectNoAllowed(t, lm, "denied.example.test")
	})

	t.Run("opaque TCP only to an address handed out for an allowed name", func(t *testing.T) {
		m, lm := u.mark(), allow.logMark(t)
		var tc tcpAnswer
		allow.probe(t, &tc, "tcp", "allowed.example.test", "22") // resolves, then connects
		if !tc.Connected || tc.Data != banner {
			t.Fatalf("banner server on the allowed name's address: %+v", tc)
		}
		allow.probe(t, &tc, "tcp", upDecoy, "22")
		if tc.Data != "" {
			t.Fatalf("banner server on an address never handed out: %+v", tc)
		}
		if got := u.arrivalsSince(m, "tcp", upAllowed+":22"); len(got) == 0 {
			t.Fatalf("the banner server saw no connection")
		}
		nothingAt(t, m, upDecoy)
		allow.expectEvent(t, lm, upDecoy, "refused", "address not resolved for an allowed name")
		if ev := allow.expectEvent(t, lm, upAllowed, "allowed", ""); ev.Kind != "tcp" || ev.Name != "allowed.example.test" || ev.Port != 22 {
			t.Fatalf("egress event %+v", ev)
		}
	})

	t.Run("internet off: nothing, not even DNS", func(t *testing.T) {
		m := u.mark()
		if a := dns(t, off, "resolver", "allowed.example.test", "timeout=1"); a.Error != "timeout" {
			t.Fatalf("DNS with internet off: %+v, want no answer", a)
		}
		if a := dns(t, off, upAllowed, "allowed.example.test", "timeout=1"); a.Error != "timeout" {
			t.Fatalf("DNS to an outside resolver with internet off: %+v", a)
		}
		res := off.sh(t, "curl -sS --connect-timeout 2 -m 4 --resolve allowed.example.test:80:"+upAllowed+" http://allowed.example.test/")
		if res.Code == 0 {
			t.Fatalf("curl with internet off: %s", res)
		}
		var tc tcpAnswer
		off.probe(t, &tc, "tcp", upAllowed, "22", "timeout=2")
		if tc.Connected {
			t.Fatalf("TCP with internet off: %+v", tc)
		}
		nothingAt(t, m, "")
		if evs := off.egress(t); len(evs) > 0 {
			t.Fatalf("egress log of a sandbox without internet:\n%s", fmtEvents(evs))
		}
	})

	t.Run("internet without an allow list", func(t *testing.T) {
		m := u.mark()
		for _, target := range []string{"http://denied.example.test/", "--cacert /workspace/test-ca.pem https://denied.example.test:8443/", "http://" + upAllowed + "/"} {
			if st, res := open.curl(t, target); st != "200" {
				t.Fatalf("curl %s: got %s %s", target, st, res)
			}
		}
		if got := u.requestsSince(m, nil); len(got) != 3 {
			t.Fatalf("upstreams received %+v", got)
		}
		// Blocked ranges are covered above for this sandbox too.
	})

	t.Run("policy changed on a live sandbox", func(t *testing.T) {
		// A kept-alive connection made while everything is allowed: its
		// next request meets the new policy.
		st, data := r.call(t, "POST", "/v1/sandboxes/"+open.ID+"/exec", strings.NewReader(fmt.Sprintf(`{"cmd":%q,"background":true}`,
			`python3 /workspace/probe.py http denied.example.test 80 0 '' '[{"host":"denied.example.test","path":"/ka1","done_file":"/workspace/ka1"},{"host":"denied.example.test","path":"/ka2","wait_for":"/workspace/go"}]' > /workspace/ka.tmp; mv /workspace/ka.tmp /workspace/ka.json`)))
		if st != http.StatusCreated {
			t.Fatalf("background exec: %d %s", st, data)
		}
		waitFile(t, open, "/workspace/ka1")

		set := func(body string) {
			t.Helper()
			st, data := r.call(t, "PUT", "/v1/sandboxes/"+open.ID+"/network", strings.NewReader(body))
			var sb api.Sandbox
			if st != http.StatusOK || json.Unmarshal(data, &sb) != nil {
				t.Fatalf("PUT network %s: %d %s", body, st, data)
			}
			st, data = r.call(t, "GET", "/v1/sandboxes/"+open.ID+"/network", nil)
			var got, want api.Network
			json.Unmarshal(data, &got)
			json.Unmarshal([]byte(body), &want)
			if st != http.StatusOK || got.Internet != want.Internet || strings.Join(got.Allow, ",") != strings.Join(want.Allow, ",") ||
				strings.Join(sb.Network.Allow, ",") != strings.Join(want.Allow, ",") {
				t.Fatalf("GET network after PUT %s: %d %s (PUT answered %+v)", body, st, data, sb.Network)
			}
		}

		// Allow -> deny for denied.example.test.
		m, lm := u.mark(), open.logMark(t)
		set(`{"internet":true,"allow":["allowed.example.test"]}`)
		open.put(t, "/workspace/go", nil)
		waitFile(t, open, "/workspace/ka.json")
		var ka httpAnswer
		res := open.sh(t, "cat /workspace/ka.json")
		if json.Unmarshal([]byte(res.Out), &ka) != nil || len(ka.Responses) != 2 || ka.Responses[0].Status != 200 || ka.Responses[1].Status != 502 {
			t.Fatalf("kept-alive connection across the change: %s", res)
		}
		if a := dns(t, open, "resolver", "denied.example.test"); a.Rcode != "REFUSED" {
			t.Fatalf("DNS for the now denied name: %+v", a)
		}
		if st, res := open.curl(t, "--resolve denied.example.test:80:"+upDenied+" http://denied.example.test/"); st != "502" {
			t.Fatalf("denied after the change: %s %s", st, res)
		}
		if st, res := open.curl(t, "http://allowed.example.test/"); st != "200" {
			t.Fatalf("allowed after the change: %s %s", st, res)
		}
		if st, res := open.curl(t, "http://"+upAllowed+"/"); st != "502" {
			t.Fatalf("IP literal after the change: %s %s", st, res)
		}
		noRequestAt(t, m, upDenied)
		open.expectEvent(t, lm, "denied.example.test", "refused", "name not allowed")

		// Opaque TCP to the address the resolver hands out for the
		// allowed name.
		var tc tcpAnswer
		open.probe(t, &tc, "tcp", "allowed.example.test", "22")
		if tc.Data != banner {
			t.Fatalf("banner on the allowed name's address: %+v", tc)
		}

		// Deny -> allow, and allowed.example.test the other way.
		m, lm = u.mark(), open.logMark(t)
		set(`{"internet":true,"allow":["denied.example.test"]}`)
		// The address was handed out for a name the policy no longer
		// allows.
		open.probe(t, &tc, "tcp", upAllowed, "22")
		if tc.Data != "" {
			t.Fatalf("opaque TCP to an address of a name no longer allowed: %+v", tc)
		}
		open.expectEvent(t, lm, upAllowed, "refused", "address not resolved for an allowed name")
		if st, res := open.curl(t, "http://denied.example.test/"); st != "200" {
			t.Fatalf("denied.example.test once allowed: %s %s", st, res)
		}
		if st, res := open.curl(t, "--resolve allowed.example.test:80:"+upAllowed+" http://allowed.example.test/"); st != "502" {
			t.Fatalf("allowed.example.test once denied: %s %s", st, res)
		}
		if got := u.requestsSince(m, nil); len(got) != 1 || got[0].Addr != upDenied {
			t.Fatalf("upstreams received %+v, want one request at the newly allowed host", got)
		}
		open.expectEvent(t, lm, "allowed.example.test", "refused", "name not allowed")

		// Off -> on: the sandbox that had no network gets one.
		m = u.mark()
		st, data = r.call(t, "PUT", "/v1/sandboxes/"+off.ID+"/network", strings.NewReader(`{"internet":true,"allow":["allowed.example.test"]}`))
		if st != http.StatusOK {
			t.Fatalf("PUT network: %d %s", st, data)
		}
		if st, res := off.curl(t, "http://allowed.example.test/"); st != "200" {
			t.Fatalf("after internet on: %s %s", st, res)
		}
		oneRequest(t, m, upAllowed)
		// And back off: nothing again.
		st, data = r.call(t, "PUT", "/v1/sandboxes/"+off.ID+"/network", strings.NewReader(`{"internet":false}`))
		if st != http.StatusOK {
			t.Fatalf("PUT network: %d %s", st, data)
		}
		m = u.mark()
		if res := off.sh(t, "curl -sS --connect-timeout 2 -m 4 --resolve allowed.example.test:80:"+upAllowed+" http://allowed.example.test/"); res.Code == 0 {
			t.Fatalf("after internet off again: %s", res)
		}
		nothingAt(t, m, "")
	})

	t.Run("the egress log through the CLI", func(t *testing.T) {
		out, errs, code := r.cli(t, "", "sandbox", "egress", open.ID)
		if code != 0 || !strings.Contains(out, "VERDICT") || !strings.Contains(out, "denied.example.test") || !strings.Contains(out, "refused") || !strings.Contains(out, "name not allowed") {
			t.Fatalf("sandbox egress: exit %d %q %q", code, out, errs)
		}
		out, errs, code = r.cli(t, "", "sandbox", "egress", "--json", allow.ID)
		var l api.EgressLog
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Events) == 0 {
			t.Fatalf("sandbox egress --json: exit %d %q %q", code, out, errs)
		}
		if got := len(allow.egress(t)); got < len(l.Events) {
			t.Fatalf("API has %d events, CLI %d", got, len(l.Events))
		}
	})

	t.Run("DNS tunnels: a flood of unique names is refused after the limit", func(t *testing.T) {
		// A sandbox of its own: its minute of names starts with the flood.
		// Every name is in the platform's hosts file, so none reaches the
		// host's resolver.
		fl := newBox(t, r, allowJSON, u.CAPEM)
		var f floodAnswer
		fl.probe(t, &f, "flood", fmt.Sprint(floodNames))
		if f.NoError != 200 || f.Refused != floodNames-200 || f.FirstRefused != 200 || f.AnsweredAfterRefusal != 0 {
			t.Fatalf("flood of %d names: %+v, want 200 answered, then every one REFUSED", floodNames, f)
		}
		fl.expectEvent(t, 0, floodName(floodNames-1), "refused", "too many names")
		// A name it already resolved this minute still resolves; a new
		// one, even allowed, does not.
		if a := dns(t, fl, "resolver", floodName(0)); a.Rcode != "NOERROR" || len(a.Answers) != 1 {
			t.Fatalf("a name resolved before the limit: %+v", a)
		}
		if a := dns(t, fl, "resolver", "allowed.example.test"); a.Rcode != "REFUSED" {
			t.Fatalf("a new allowed name after the limit: %+v", a)
		}
	})

	// A microVM's NIC is a new tap descriptor in a restored QEMU; a gVisor
	// sandbox's namespace is rejoined from its checkpoint. Either way the
	// link, the resolver and the policy are what they were.
	t.Run("after a pause and a resume the same network and policy", func(t *testing.T) {
		for _, op := range []string{"pause", "resume"} {
			if st, data := r.call(t, "POST", "/v1/sandboxes/"+allow.ID+"/"+op, nil); st != http.StatusOK {
				t.Fatalf("%s: %d %s", op, st, data)
			}
		}
		m := u.mark()
		st, res := allow.curl(t, "--cacert /workspace/test-ca.pem https://allowed.example.test/")
		if st != "200" || !strings.Contains(res.Out, "hello from allowed.example.test over https") {
			t.Fatalf("an allowed host after resume: got %s %s", st, res)
		}
		oneRequest(t, m, upAllowed)
		m, lm := u.mark(), allow.logMark(t)
		if st, res := allow.curl(t, "--resolve denied.example.test:80:"+upDenied+" http://denied.example.test/"); st != "502" || !strings.Contains(res.Out, "name not allowed") {
			t.Fatalf("a denied host after resume: got %s %s, want the proxy's 502", st, res)
		}
		nothingAt(t, m, upDenied)
		allow.expectEvent(t, lm, "denied.example.test", "refused", "name not allowed")
	})
}

// waitFile waits until path exists in the sandbox.
func waitFile(t *testing.T, b *box, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _ := call(t, b.r.s, b.r.s.Key, "GET", "/v1/sandboxes/"+b.ID+"/files/stat?path="+path, nil)
		if st == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear in the sandbox", path)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
