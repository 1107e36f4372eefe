package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/store"
)

// lockDataDir takes DATA/node.lock, exclusively, for as long as the file
// stays open: two daemons on one data dir would both be the same node
// (one id, one set of sandboxes) and undo each other's work. The
// descriptor is close-on-exec (as every file Go opens), so no sandbox or
// helper inherits the lock.
func lockDataDir(dataDir string) (*os.File, error) {
	path := filepath.Join(dataDir, "node.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another withruntime node runs on data dir %s (%s is locked): one daemon per data dir", dataDir, path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

// storePasswordEnv are the variables the PostgreSQL driver reads a
// password from. It has read them when the store opened; what the node
// starts (runsc, and through it every sandbox's host side) inherits the
// environment, so they go.
var storePasswordEnv = []string{"PGPASSWORD", "PGPASSFILE"}

// forgetStorePassword unsets storePasswordEnv; call it once the store is
// open.
func forgetStorePassword() {
	for _, k := range storePasswordEnv {
		os.Unsetenv(k)
	}
}

// blockRefresh is how often a node reads the other nodes' addresses again
// for its sandboxes' blocklist.
const blockRefresh = 30 * time.Second

// installationBlock keeps the installation's own services on a node's
// egress blocklist: the store's addresses, and every registered node's
// (which may be public, or in an --egress-permit range). Addresses only
// ever join it.
type installationBlock struct {
	list   *egress.Blocklist
	store  string // the store's URL
	self   string // this node's advertised address
	st     store.Store
	logger *slog.Logger
	lookup func(ctx context.Context, host string) ([]netip.Addr, error) // nil: the host's resolver

	have []netip.Prefix
}

// run refreshes the list every blockRefresh until ctx ends.
func (b *installationBlock) run(ctx context.Context) {
	t := time.NewTicker(blockRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.refresh(ctx)
	}
}

// refresh reads the nodes and resolves every address again.
func (b *installationBlock) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	hosts := append(storeHosts(b.store), hostOf(b.self))
	nodes, err := b.st.ListNodes(ctx)
	if err != nil {
		b.logger.Warn("egress: reading the nodes to block their addresses", "err", err)
	}
	for _, n := range nodes {
		hosts = append(hosts, hostOf(n.Addr))
	}
	for _, h := range hosts {
		addrs, err := b.resolve(ctx, h)
		if err != nil {
			b.logger.Warn("egress: resolving an address of the installation to block it", "host", h, "err", err)
		}
		for _, a := range addrs {
			a = a.Unmap().WithZone("")
			p := netip.PrefixFrom(a, a.BitLen())
			if !slices.Contains(b.have, p) {
				b.have = append(b.have, p)
			}
		}
	}
	b.list.SetMore(b.have)
}

func (b *installationBlock) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if host == "" {
		return nil, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if b.lookup != nil {
		return b.lookup(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// storeHosts are the hosts a PostgreSQL URL names: its authority's
// (several, comma separated, for fallbacks) and its host and hostaddr
// parameters. Unix sockets (a path) are no address.
func storeHosts(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var hosts []string
	add := func(list string) {
		for _, h := range strings.Split(list, ",") {
			if h = hostOf(h); h != "" && !strings.HasPrefix(h, "/") {
				hosts = append(hosts, h)
			}
		}
	}
	add(u.Host)
	add(u.Query().Get("host"))
	add(u.Query().Get("hostaddr"))
	return hosts
}

// hostOf is the host of host:port, or s itself without a port.
func hostOf(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return strings.Trim(s, "[]")
}
