package egress

import "testing"

// TestDNSInternetOff: a query that reaches the resolver from a sandbox
// whose internet is off (the packet rules drop them, but one may arrive as
// the policy turns off) is refused and logged as the proxy logs its
// connections: "internet off", not a name the allow list lacks.
func TestDNSInternetOff(t *testing.T) {
	e := newEnv(t, Policy{})
	for _, network := range []string{"udp", "tcp"} {
		if rcode, addrs := e.query(t, network, "plain.test", qA); rcode != rcodeRefused || len(addrs) != 0 {
			t.Errorf("%s: got %v %v, want REFUSED and no address", network, rcode, addrs)
		}
		e.wantEvent("dns", "plain.test", Refused, "internet off")
	}
}
