package node

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// MaxPendingPerSource bounds the connections one source (an IPv4 address,
// an IPv6 /64) may hold open that have not finished the TLS handshake. The
// RPC has no bound on its connections as a whole: anyone may connect, and
// strangers who hold silent connections must not lock the installation's
// API servers out. Each pending connection ends at the handshake's timeout
// (ReadHeaderTimeout); this bound keeps one source from holding the node's
// descriptors meanwhile. API servers keep a few connections each.
const MaxPendingPerSource = 64

// Serve serves srv (NewServer) on l over TLS until srv closes, with at
// most MaxPendingPerSource connections of each source before their
// handshake; more are closed at once.
func Serve(srv *http.Server, l net.Listener) error {
	p := &pending{max: MaxPendingPerSource, n: map[netip.Prefix]int{}}
	next := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if s != http.StateNew {
			p.handshaken(c)
		}
		if next != nil {
			next(c, s)
		}
	}
	return srv.ServeTLS(&pendingListener{Listener: l, p: p}, "", "")
}

// pending counts the connections of each source that have not finished
// their handshake.
type pending struct {
	mu  sync.Mutex
	max int
	n   map[netip.Prefix]int
}

func (p *pending) take(src netip.Prefix) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[src] >= p.max {
		return false
	}
	p.n[src]++
	return true
}

func (p *pending) give(src netip.Prefix) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[src]--; p.n[src] <= 0 {
		delete(p.n, src)
	}
}

// handshaken is told by the server of a connection past its handshake
// (the server reports a state after StateNew only then, or at its close).
func (p *pending) handshaken(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if pc, ok := c.(*pendingConn); ok {
		pc.done()
	}
}

// source is the bucket of a remote address: IPv4 addresses one by one,
// IPv6 by /64, which one holder has many addresses of.
func source(a net.Addr) netip.Prefix {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Prefix{}
	}
	addr := ap.Addr().Unmap().WithZone("")
	if addr.Is4() {
		return netip.PrefixFrom(addr, 32)
	}
	p, _ := addr.Prefix(64)
	return p
}

type pendingListener struct {
	net.Listener
	p *pending
}

func (l *pendingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := source(c.RemoteAddr())
		if !l.p.take(src) {
			c.Close()
			continue
		}
		return &pendingConn{Conn: c, p: l.p, src: src}, nil
	}
}

// pendingConn holds its source's slot until its handshake is done or it
// closes.
type pendingConn struct {
	net.Conn
	p    *pending
	src  netip.Prefix
	once sync.Once
}

func (c *pendingConn) done() { c.once.Do(func() { c.p.give(c.src) }) }

func (c *pendingConn) Close() error {
	c.done()
	return c.Conn.Close()
}
