package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// ErrNotFound is returned by the Resolver for a name with no usable
// address: unknown, IPv6 only, or only addresses on the Blocklist.
var ErrNotFound = errors.New("no usable address")

// Why a name has no usable address: errors that are ErrNotFound, with the
// detail the egress log shows.
var (
	errNoSuchName = &notFound{"no such name"}
	errFiltered   = &notFound{"only blocked or IPv6 addresses"}
)

type notFound struct{ why string }

func (e *notFound) Error() string        { return ErrNotFound.Error() + " (" + e.why + ")" }
func (e *notFound) Is(target error) bool { return target == ErrNotFound }

// lookupFailure is the egress log's reason for a failed lookup: short, and
// naming nothing of the host's resolver (its address is in the errors of
// the host's resolver).
func lookupFailure(err error) string {
	var nf *notFound
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &nf):
		return "lookup failed: " + nf.why
	case errors.As(err, &dnsErr) && dnsErr.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return "lookup failed: timed out"
	case errors.As(err, &dnsErr) && dnsErr.Err != "":
		return "lookup failed: " + dnsErr.Err
	}
	return "lookup failed: resolver error"
}

// Hosts maps normalized names to addresses, as a hosts file does.
type Hosts map[string][]netip.Addr

// LoadHostsFile reads a hosts file: lines "ADDRESS NAME..." as in
// /etc/hosts, "#" starting a comment.
func LoadHostsFile(path string) (Hosts, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening hosts file: %w", err)
	}
	defer f.Close()
	h, err := ParseHosts(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// ParseHosts parses hosts-file lines "ADDRESS NAME...".
func ParseHosts(r io.Reader) (Hosts, error) {
	h := Hosts{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) == 1 {
			return nil, fmt.Errorf("line %d: an address without a name", n)
		}
		addr, err := netip.ParseAddr(fields[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		for _, name := range fields[1:] {
			name = normalize(name)
			if err := checkHostname(name); err != nil {
				return nil, fmt.Errorf("line %d: name %q: %s", n, name, err)
			}
			h[name] = append(h[name], addr.Unmap())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading hosts: %w", err)
	}
	return h, nil
}

// LookupFunc resolves a name to addresses; the default asks the host's
// resolver (net.DefaultResolver) for IPv4 addresses.
type LookupFunc func(ctx context.Context, name string) ([]netip.Addr, error)

func defaultLookup(ctx context.Context, name string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip4", name)
}

const (
	// DefaultHandoutTTL is how long an address the resolver gave a sandbox
	// opens opaque TCP to it.
	DefaultHandoutTTL = 5 * time.Minute
	// cacheTTL is how long the host resolver's answers are reused.
	cacheTTL = 30 * time.Second
	// maxCached bounds the answer cache and each sandbox's handouts.
	maxCached = 10000
)

// Resolver answers names for sandboxes: from the hosts file first, then
// from the host's resolver; it returns only IPv4 addresses that are not
// Blocked. It remembers, per sandbox, which addresses it handed out for
// which name, for the proxy's rule on opaque TCP.
type Resolver struct {
	hosts   Hosts
	blocked *Blocklist
	lookup  LookupFunc
	ttl     time.Duration

	mu       sync.Mutex // guards cache and handouts
	cache    map[string]cached
	handouts map[string]map[handout]time.Time // sandbox -> (addr, name) -> expiry
}

type cached struct {
	addrs   []netip.Addr
	err     error
	expires time.Time
}

type handout struct {
	addr netip.Addr
	name string
}

// NewResolver returns a resolver over hosts (may be nil) and lookup (nil:
// the host's resolver), filtering by blocked, remembering handouts for ttl
// (0: DefaultHandoutTTL).
func NewResolver(hosts Hosts, blocked *Blocklist, lookup LookupFunc, ttl time.Duration) *Resolver {
	if lookup == nil {
		lookup = defaultLookup
	}
	if ttl <= 0 {
		ttl = DefaultHandoutTTL
	}
	return &Resolver{
		hosts: hosts, blocked: blocked, lookup: lookup, ttl: ttl,
		cache: map[string]cached{}, handouts: map[string]map[handout]time.Time{},
	}
}

// Lookup resolves name to its usable addresses: IPv4, not Blocked. It
// records nothing.
func (r *Resolver) Lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	name = normalize(name)
	raw, err := r.raw(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range raw {
		a = a.Unmap()
		if a.Is4() && !r.blocked.Blocked(a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resolving %s: %w", name, errFiltered)
	}
	return out, nil
}

func (r *Resolver) raw(ctx context.Context, name string) ([]netip.Addr, error) {
	if addrs, ok := r.hosts[name]; ok {
		return addrs, nil
	}
	now := time.Now()
	r.mu.Lock()
	c, ok := r.cache[name]
	r.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.addrs, c.err
	}
	addrs, err := r.lookup(ctx, name)
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		err = fmt.Errorf("resolving %s: %w", name, errNoSuchName)
	case err != nil:
		// Timeouts and other failures are not cached: the next try may
		// succeed.
		return nil, fmt.Errorf("resolving %s: %w", name, err)
	}
	r.mu.Lock()
	if len(r.cache) >= maxCached {
		clear(r.cache)
	}
	r.cache[name] = cached{addrs: addrs, err: err, expires: now.Add(cacheTTL)}
	r.mu.Unlock()
	return addrs, err
}

// Answer resolves name for sandbox id, as Lookup does, and remembers the
// addresses as handed to that sandbox for name.
func (r *Resolver) Answer(ctx context.Context, id, name string) ([]netip.Addr, error) {
	addrs, err := r.Lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	name = normalize(name)
	expires := time.Now().Add(r.ttl)
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.handouts[id]
	if h == nil {
		h = map[handout]time.Time{}
		r.handouts[id] = h
	}
	if len(h) >= maxCached {
		now := time.Now()
		for k, exp := range h {
			if now.After(exp) {
				delete(h, k)
			}
		}
		if len(h) >= maxCached {
			clear(h)
		}
	}
	for _, a := range addrs {
		h[handout{a, name}] = expires
	}
	return addrs, nil
}

// HandedOut returns the names for which the resolver gave sandbox id the
// address addr, and whose handout has not expired.
func (r *Resolver) HandedOut(id string, addr netip.Addr) []string {
	addr = addr.Unmap()
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for k, exp := range r.handouts[id] {
		if k.addr == addr && now.Before(exp) {
			names = append(names, k.name)
		}
	}
	return names
}

// Forget drops what the resolver remembers for sandbox id.
func (r *Resolver) Forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.handouts, id)
}
