package network

import (
	"errors"
	"fmt"
	"net/netip"
)

// DefaultPool is where sandbox addresses come from when Config.Pool is
// unset: part of the shared address space (100.64.0.0/10), which the
// egress proxy never lets a sandbox reach.
var DefaultPool = netip.MustParsePrefix("100.96.0.0/12")

// ErrNoLink is returned for a sandbox whose host end does not exist.
var ErrNoLink = errors.New("network: link not found")

// Config is one server's plumbing.
type Config struct {
	// Name tags this server's interfaces ("w<Name>...") and nft table
	// ("withruntime_<Name>"): exactly three characters of [0-9a-z], so
	// that no server's name is a prefix of another's.
	Name string
	// ProxyPort is where redirected TCP goes: a listener on the host on
	// every address (the rules redirect to the address of the sandbox's
	// host end).
	ProxyPort int
	// DNSPort is where DNS (UDP and TCP port 53) goes, on every address.
	DNSPort int
	// Pool holds the sandboxes' addresses, one /30 each; DefaultPool if
	// unset.
	Pool netip.Prefix
}

// Link is a sandbox's veth pair. The manager persists it as JSON and
// hands it back to Adopt after a restart.
type Link struct {
	HostIf      string       `json:"host_if"`
	HostAddr    netip.Addr   `json:"host_addr"`
	SandboxAddr netip.Addr   `json:"sandbox_addr"`
	Prefix      netip.Prefix `json:"prefix"`
}

const nameLen = 3

// Validate checks c after defaults are applied.
func (c Config) Validate() error {
	if err := validName(c.Name); err != nil {
		return err
	}
	for _, p := range []struct {
		what string
		port int
	}{{"proxy", c.ProxyPort}, {"dns", c.DNSPort}} {
		if p.port < 1 || p.port > 65535 {
			return fmt.Errorf("%s port %d: out of range", p.what, p.port)
		}
		// Port 53 would make the redirect of a sandbox's own DNS a no-op
		// that the rules cannot tell from a direct connection, and the
		// host-wide drop of the port would hit the host's resolver.
		if p.port == 53 {
			return fmt.Errorf("%s port 53: the redirected ports must not be 53", p.what)
		}
	}
	if c.ProxyPort == c.DNSPort {
		return fmt.Errorf("proxy and dns port are both %d", c.ProxyPort)
	}
	pool := c.pool()
	if !pool.IsValid() || !pool.Addr().Is4() || pool.Bits() > 30 {
		return fmt.Errorf("pool %s: want an IPv4 prefix of /30 or wider", c.Pool)
	}
	if pool != pool.Masked() {
		return fmt.Errorf("pool %s: host bits set", c.Pool)
	}
	return nil
}

func (c Config) pool() netip.Prefix {
	if !c.Pool.IsValid() {
		return DefaultPool
	}
	return c.Pool
}

func (c Config) table() string { return "withruntime_" + c.Name }

// ifPrefix is the start of every host end of this server.
func (c Config) ifPrefix() string { return "w" + c.Name }

// maxIfName is IFNAMSIZ less the NUL.
const maxIfName = 15

// hostIf names the host end of sandbox id's veth: the server's prefix and
// as much of the end of the id as fits.
func (c Config) hostIf(id string) (string, error) {
	if id == "" {
		return "", errors.New("empty sandbox id")
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_' || r == '.') {
			return "", fmt.Errorf("sandbox id %q: character %q cannot be in an interface name", id, r)
		}
	}
	tail := id[max(0, len(id)-(maxIfName-len(c.ifPrefix()))):]
	return c.ifPrefix() + tail, nil
}

// validName checks a server's network name: it goes into nft scripts and
// interface names.
func validName(name string) error {
	if len(name) != nameLen {
		return fmt.Errorf("network name %q: want exactly %d characters", name, nameLen)
	}
	for _, r := range name {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z') {
			return fmt.Errorf("network name %q: want only 0-9 and a-z", name)
		}
	}
	return nil
}
