package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/withruntime/withruntime/internal/network"
)

// The benchmark's upstream: an HTTP server in a network namespace the
// program makes itself, on a veth pair in 198.18.0.0/15 (reserved for
// benchmarks, never routed on the internet). Nothing is ever sent
// anywhere else.
var (
	upstreamNet  = netip.MustParsePrefix("198.18.99.0/24")
	upstreamHost = netip.MustParseAddr("198.18.99.1") // the host's end
	upstreamAddr = netip.MustParseAddr("198.18.99.2") // the server, in the namespace
)

const (
	upstreamName = "upstream.bench.test"
	// bigSize is the body at /big: 100 MB.
	bigSize = 100_000_000
	// peerName is the namespace's end of the veth pair.
	peerName = "up0"
)

// upstream is the namespace, the veth pair, the HTTP server and the hosts
// file that tells the egress resolver the server's name.
type upstream struct {
	dir       string // temp dir: the pinned namespace and the hosts file
	nsPath    string
	hostIf    string
	listener  net.Listener
	srv       *http.Server
	hostsFile string
}

// startUpstream makes the namespace and the veth pair, checks that the
// route to the server's address goes to that pair and nowhere else, and
// starts the server inside. On error nothing is left behind.
func startUpstream() (_ *upstream, retErr error) {
	if err := upstreamNetFree(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "withruntime-bench-upstream-")
	if err != nil {
		return nil, err
	}
	u := &upstream{dir: dir, nsPath: filepath.Join(dir, "ns")}
	defer func() {
		if retErr != nil {
			u.Close()
		}
	}()
	if err := network.NewNamespace(u.nsPath); err != nil {
		return nil, fmt.Errorf("namespace: %w", err)
	}
	ns, err := os.Open(u.nsPath)
	if err != nil {
		return nil, err
	}
	defer ns.Close()

	var suffix [3]byte
	rand.Read(suffix[:])
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: "bnch" + hex.EncodeToString(suffix[:])},
		PeerName:      peerName,
		PeerNamespace: netlink.NsFd(ns.Fd()),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("creating veth %s: %w", veth.Name, err)
	}
	u.hostIf = veth.Name
	disableIPv6(veth.Name)
	if err := netlink.AddrAdd(veth, &netlink.Addr{IPNet: ipNet(upstreamHost)}); err != nil {
		return nil, fmt.Errorf("adding %s to %s: %w", upstreamHost, veth.Name, err)
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		return nil, fmt.Errorf("setting %s up: %w", veth.Name, err)
	}
	err = network.InNamespace(ns.Name(), func() error {
		disableIPv6(peerName)
		peer, err := netlink.LinkByName(peerName)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(peer, &netlink.Addr{IPNet: ipNet(upstreamAddr)}); err != nil {
			return fmt.Errorf("adding %s: %w", upstreamAddr, err)
		}
		return netlink.LinkSetUp(peer)
	})
	if err != nil {
		return nil, fmt.Errorf("configuring %s in the namespace: %w", peerName, err)
	}
	if err := u.verify(); err != nil {
		return nil, err
	}

	// The listening socket belongs to the namespace it was made in; the
	// server's goroutines then accept on it from any thread.
	err = network.InNamespace(ns.Name(), func() error {
		l, err := net.Listen("tcp4", net.JoinHostPort(upstreamAddr.String(), "80"))
		u.listener = l
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening in the namespace: %w", err)
	}
	u.srv = &http.Server{Handler: upstreamHandler(), ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(u.listener)

	u.hostsFile = filepath.Join(dir, "hosts")
	line := fmt.Sprintf("%s %s\n", upstreamAddr, upstreamName)
	if err := os.WriteFile(u.hostsFile, []byte(line), 0o644); err != nil {
		return nil, err
	}
	return u, nil
}

// upstreamNetFree refuses to start when any interface of the host already
// has an address in the upstream's /24 (another run, or a leftover of a
// killed one): the route to the server would be ambiguous.
func upstreamNetFree() error {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP)
		if upstreamNet.Contains(ip.Unmap()) {
			name := strconv.Itoa(a.LinkIndex)
			if l, err := netlink.LinkByIndex(a.LinkIndex); err == nil {
				name = l.Attrs().Name
			}
			return fmt.Errorf("%s is already on interface %s: remove it (ip link del %s) or wait for the other run", ip, name, name)
		}
	}
	return nil
}

// verify checks, before any packet is sent, that the host routes the
// server's address to the veth pair (a failed setup must never send the
// benchmark's traffic off the machine) and that the namespace's end
// carries that address.
func (u *upstream) verify() error {
	link, err := netlink.LinkByName(u.hostIf)
	if err != nil {
		return err
	}
	routes, err := netlink.RouteGet(upstreamAddr.AsSlice())
	if err != nil {
		return fmt.Errorf("route lookup of %s: %w", upstreamAddr, err)
	}
	if len(routes) != 1 || routes[0].LinkIndex != link.Attrs().Index || routes[0].Gw != nil {
		return fmt.Errorf("route lookup of %s: got %v, want directly on %s", upstreamAddr, routes, u.hostIf)
	}
	ns, err := os.Open(u.nsPath)
	if err != nil {
		return err
	}
	defer ns.Close()
	return network.InNamespace(ns.Name(), func() error {
		peer, err := netlink.LinkByName(peerName)
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(peer, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		if len(addrs) != 1 || !addrs[0].IP.Equal(upstreamAddr.AsSlice()) {
			return fmt.Errorf("%s in the namespace has %v, want only %s", peerName, addrs, upstreamAddr)
		}
		return nil
	})
}

// Close stops the server and removes the veth pair, the namespace and the
// temp dir. It is safe on a partly made upstream.
func (u *upstream) Close() error {
	var errs []error
	if u.srv != nil {
		u.srv.Close()
	} else if u.listener != nil {
		u.listener.Close()
	}
	if u.hostIf != "" {
		// Deleting one end removes the pair.
		if l, err := netlink.LinkByName(u.hostIf); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("removing %s: %w", u.hostIf, err))
			}
		}
	}
	if err := network.RemoveNamespace(u.nsPath); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(u.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// upstreamHandler serves a tiny response at / and bigSize bytes at /big.
func upstreamHandler() http.Handler {
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(bigSize))
		for left := bigSize; left > 0; {
			n := min(left, len(chunk))
			if _, err := w.Write(chunk[:n]); err != nil {
				return
			}
			left -= n
		}
	})
	return mux
}

// disableIPv6 keeps an interface of the calling thread's namespace from
// taking IPv6 addresses (and sending router solicitations); the upstream
// is IPv4 only. Best effort: a kernel without IPv6 has no such file.
func disableIPv6(name string) {
	os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0o644)
}

func ipNet(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(upstreamNet.Bits(), 32)}
}
