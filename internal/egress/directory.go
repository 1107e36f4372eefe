package egress

import (
	"net/netip"
	"time"
)

// Policy is a sandbox's network policy. Internet false: nothing is
// reachable. Internet true with an empty Allow: every public address.
// Otherwise only what Allow names: exact names, "*.example.org" for every
// name under example.org (not example.org itself), addresses ("1.1.1.1")
// and CIDR prefixes ("10.1.0.0/16") for connections to those addresses
// (never to the never-reachable ones, see Blocklist).
type Policy struct {
	Internet bool
	Allow    []string
}

// Sandbox is what the proxy and the resolver need to know about the
// sandbox a packet came from.
type Sandbox struct {
	ID      string
	Account string
	Policy  Policy
}

// Directory finds the sandbox that owns a sandbox-side address. The
// manager implements it; the answer reflects policy changes at once.
type Directory interface {
	SandboxByAddr(addr netip.Addr) (Sandbox, bool)
}

// Secret is a secret of an account as the proxy uses it: bound to Host
// (an exact name or a "*." wildcard), its Placeholder replaced by Value in
// request headers of HTTPS requests to that host only.
type Secret struct {
	Name        string
	Host        string
	Placeholder string
	Value       string
}

// Secrets gives the proxy an account's secrets as they are now.
type Secrets interface {
	ForAccount(account string) ([]Secret, error)
}

// Verdicts in the egress log.
const (
	Allowed = "allowed"
	Refused = "refused"
)

// Event is one line of a sandbox's egress log.
type Event struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // "dns", "tcp", "tls", "http"
	Name    string    `json:"name,omitempty"`
	Address string    `json:"address,omitempty"`
	Port    int       `json:"port,omitempty"`
	Verdict string    `json:"verdict"`
	Reason  string    `json:"reason,omitempty"`
}
