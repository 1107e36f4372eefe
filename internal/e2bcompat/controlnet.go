package e2bcompat

import (
	"encoding/json"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// e2bNetwork is E2B's network options (create and PUT .../network).
type e2bNetwork struct {
	AllowOut           []string        `json:"allowOut"`
	DenyOut            []string        `json:"denyOut"`
	AllowPublicTraffic *bool           `json:"allowPublicTraffic"`
	Rules              json.RawMessage `json:"rules"`
	DNSServers         json.RawMessage `json:"dnsServers"`
	EgressProxy        json.RawMessage `json:"egressProxy"`
	MaskRequestHost    json.RawMessage `json:"maskRequestHost"`
	HTTPSPorts         json.RawMessage `json:"httpsPorts"`
}

// denyAll is the denyOut entry that stands for all traffic.
func denyAll(e string) bool { return e == "0.0.0.0/0" || e == "::/0" }

// networkOf is withruntime's policy for E2B's options. E2B allows all
// egress unless told otherwise (here unless noInternet, the operator's
// serve --e2b-internet=false, makes denying it the default);
// allow_internet_access false, or denyOut 0.0.0.0/0, denies it;
// allow_internet_access true allows it; allowOut entries (names, "*."
// wildcards, addresses and CIDR prefixes, as withruntime's allow list
// takes them) are the exceptions to a denial (allow beats deny), and
// restrict nothing without one. withruntime's policy has no deny list, so
// a partial denyOut (some addresses denied, the rest allowed) is refused
// rather than widened or ignored.
func networkOf(allowInternet *bool, n *e2bNetwork, noInternet bool) (api.Network, error) {
	if n == nil {
		n = &e2bNetwork{}
	}
	switch {
	case given(n.Rules) && string(n.Rules) != "{}":
		return api.Network{}, unsupported("network.rules (per-host header rules; withruntime's secrets put credentials on egress: withruntime secret set)")
	case given(n.EgressProxy):
		return api.Network{}, unsupported("network.egressProxy")
	case given(n.DNSServers) && string(n.DNSServers) != "[]":
		return api.Network{}, unsupported("network.dnsServers (withruntime's egress resolver answers every sandbox)")
	case given(n.MaskRequestHost):
		return api.Network{}, unsupported("network.maskRequestHost")
	case given(n.HTTPSPorts) && string(n.HTTPSPorts) != "[]":
		return api.Network{}, unsupported("network.httpsPorts")
	}
	deny := noInternet
	if allowInternet != nil {
		deny = !*allowInternet
	}
	for _, e := range n.DenyOut {
		if !denyAll(strings.TrimSpace(e)) {
			return api.Network{}, unsupported("network.denyOut " + e + " (only 0.0.0.0/0: withruntime denies all but an allow list, it keeps no list of denied addresses)")
		}
		deny = true
	}
	if !deny {
		return api.Network{Internet: true}, nil // allowOut alone restricts nothing
	}
	if len(n.AllowOut) == 0 {
		return api.Network{}, nil
	}
	return api.Network{Internet: true, Allow: n.AllowOut}, nil
}
