package egress

import (
	"net/http"
	"strings"
	"testing"
)

// TestAllowAddresses: address and CIDR entries of an allow list open
// connections to the addresses they cover, named or not, and nothing
// else; a name the list does not name reaches (and resolves to) only
// covered addresses.
func TestAllowAddresses(t *testing.T) {
	up := httpUpstream(t, hostEcho)
	p := port(up)
	banner := bannerUpstream(t)

	// Every test name resolves to 127.0.0.1 (testHosts).
	e := newEnv(t, Policy{Internet: true, Allow: []string{"127.0.0.0/8"}})
	c := e.client(nil)
	e.toAddr(up)
	code, body, _, err := get(c, "http://127.0.0.1:"+p+"/lit")
	if err != nil || code != 200 || !strings.Contains(body, "path=/lit") {
		t.Errorf("covered IP literal: got %d %q %v, want 200", code, body, err)
	}
	e.wantEvent("http", "127.0.0.1", Allowed, "")
	code, body, _, err = get(e.client(nil), "http://evil.test:"+p+"/name")
	if err != nil || code != 200 || !strings.Contains(body, "path=/name") {
		t.Errorf("name resolving into the prefix: got %d %q %v, want 200", code, body, err)
	}
	e.toAddr(banner)
	if got := e.rawExchange(""); got != "SSH-2.0-test\r\n" {
		t.Errorf("opaque to a covered address: got %q, want the banner", got)
	}
	e.wantEvent("tcp", "", Allowed, "")
	if rcode, addrs := e.query(t, "udp", "evil.test", qA); rcode != 0 || len(addrs) != 1 || addrs[0] != sandboxAddr {
		t.Errorf("DNS for a name resolving into the prefix: got rcode %d %v, want 127.0.0.1", rcode, addrs)
	}

	// The same traffic with an entry that does not cover 127.0.0.1.
	e.dir.setPolicy(Policy{Internet: true, Allow: []string{"127.0.0.2", "plain.test"}})
	e.toAddr(up)
	if code, _, _, err := get(e.client(nil), "http://127.0.0.1:"+p+"/"); err != nil || code != http.StatusBadGateway {
		t.Errorf("IP literal not covered: got %d %v, want 502", code, err)
	}
	e.wantEvent("http", "127.0.0.1", Refused, "IP literal not in the allow list")
	if code, _, _, err := get(e.client(nil), "http://evil.test:"+p+"/"); err != nil || code != http.StatusBadGateway {
		t.Errorf("name resolving elsewhere: got %d %v, want 502", code, err)
	}
	e.wantEvent("http", "evil.test", Refused, "name not allowed")
	if code, _, _, err := get(e.client(nil), "http://plain.test:"+p+"/"); err != nil || code != 200 {
		t.Errorf("named entry beside an address entry: got %d %v, want 200", code, err)
	}
	e.toAddr(banner)
	if got := e.rawExchange(""); got != "" {
		t.Errorf("opaque to an address not covered: got %q, want nothing", got)
	}
	e.wantEvent("tcp", "", Refused, "address not resolved for an allowed name")
	if rcode, _ := e.query(t, "udp", "evil.test", qA); rcode != rcodeRefused {
		t.Errorf("DNS for a name resolving elsewhere: got rcode %d, want REFUSED", rcode)
	}

	// A kept-alive connection opened by address follows a policy change
	// at its next request.
	e.dir.setPolicy(Policy{Internet: true, Allow: []string{"127.0.0.1"}})
	e.toAddr(up)
	kept := e.client(nil)
	if code, _, _, err := get(kept, "http://evil.test:"+p+"/1"); err != nil || code != 200 {
		t.Fatalf("first request: got %d %v, want 200", code, err)
	}
	e.dir.setPolicy(Policy{Internet: true, Allow: []string{"127.0.0.2"}})
	if code, _, _, err := get(kept, "http://evil.test:"+p+"/2"); err == nil && code == 200 {
		t.Errorf("after the address left the list: got 200, want the request refused")
	}
}

// TestAllowAddressesNeverBlocked: an address entry does not open what is
// never reachable.
func TestAllowAddressesNeverBlocked(t *testing.T) {
	e := newEnv(t, Policy{Internet: true, Allow: []string{"10.0.0.0/8", "169.254.169.254"}})
	up := httpUpstream(t, hostEcho)
	e.toAddr(up)
	for _, lit := range []string{"10.0.0.1", "169.254.169.254"} {
		code, _, _, err := get(e.client(nil), "http://plain.test:"+port(up)+"/", func(r *http.Request) { r.Host = lit })
		if err != nil || code != http.StatusBadGateway {
			t.Errorf("Host %s: got %d %v, want 502", lit, code, err)
		}
		e.wantEvent("http", lit, Refused, "blocked address")
	}
}
