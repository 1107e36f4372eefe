package egress

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
)

// Proxy is the host's egress proxy: the TCP proxy every connection of a
// sandbox is redirected to (Serve) and the DNS server every query is
// redirected to (ServeDNS).
type Proxy struct {
	cfg      Config
	blocked  *Blocklist
	resolver *Resolver
	roots    *x509.CertPool
	names    *nameLimiter
	flows    *flowTable
	dnsLimit *dnsLimiter

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc

	mu      sync.Mutex // guards closers and closed
	closers map[io.Closer]struct{}
	closed  bool
}

// NewProxy validates cfg and returns a proxy ready to serve.
func NewProxy(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	roots, err := rootPool(cfg.ExtraRoots)
	if err != nil {
		return nil, err
	}
	blocked := NewBlocklist(cfg.Blocked...)
	blocked.unblockLoopback = cfg.UnblockLoopback
	blocked.permit = cfg.Permit
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{
		cfg:      cfg,
		blocked:  blocked,
		resolver: NewResolver(cfg.Hosts, blocked, cfg.Lookup, cfg.HandoutTTL),
		roots:    roots,
		names:    newNameLimiter(cfg.DNSNamesPerMinute),
		flows:    newFlowTable(flowLimits{sandbox: cfg.MaxConns, account: cfg.MaxConnsAccount, host: cfg.MaxConnsHost}),
		dnsLimit: newDNSLimiter(cfg.DNSQueriesPerSecond, cfg.DNSInflight),
		ctx:      ctx,
		cancel:   cancel,
		closers:  map[io.Closer]struct{}{},
	}, nil
}

// Log is the proxy's per-sandbox egress log.
func (p *Proxy) Log() *Log { return p.cfg.Log }

// Resolver is the proxy's resolver.
func (p *Proxy) Resolver() *Resolver { return p.resolver }

// Blocklist is the set of addresses the proxy never connects to.
func (p *Proxy) Blocklist() *Blocklist { return p.blocked }

// Forget drops all the proxy keeps about sandbox id: its log, the
// addresses handed to it, its DNS counters, and closes its connections.
// Call it when the sandbox is gone.
func (p *Proxy) Forget(id string) {
	p.Release(id)
	p.cfg.Log.Drop(id)
}

// Release closes every connection a sandbox that ended still has through
// the proxy (both ends) and forgets what the proxy and the resolver hold
// for it (handed-out addresses, DNS counters), but keeps its egress log,
// so that it can still be read.
func (p *Proxy) Release(id string) {
	p.flows.closeSandbox(id)
	p.resolver.Forget(id)
	p.names.forget(id)
	p.dnsLimit.forget(id)
}

// CloseFlows closes every connection sandbox id has through the proxy
// (both ends), and nothing else: for a sandbox that stops running but may
// run again (a pause), whose connections would otherwise hold their slots
// and the host's descriptors until their idle timeout. What the proxy
// remembers for it stays: the addresses handed to it still open opaque
// TCP after a resume, and its DNS budgets are not reset by a pause and a
// resume. Call it once the sandbox's address no longer leads to it
// (Directory), so that no connection opened meanwhile outlives it.
func (p *Proxy) CloseFlows(id string) { p.flows.closeSandbox(id) }

// Conns is how many proxied connections sandbox id holds open now.
func (p *Proxy) Conns(id string) int { return p.flows.live(id) }

// Close stops every Serve and ServeDNS and closes every connection they
// hold.
func (p *Proxy) Close() error {
	p.cancel()
	p.flows.closeAll()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.closers {
		c.Close()
	}
	clear(p.closers)
	return nil
}

// track registers c to be closed by Close; untrack undoes it. track
// returns false (and closes c) once the proxy is closed.
func (p *Proxy) track(c io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.closers[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c io.Closer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.closers, c)
}

// Serve accepts connections on l and proxies each by its sandbox's policy
// until l is closed or the proxy is; it returns net.ErrClosed then. Every
// other error of Accept (EMFILE, ENFILE, ...) is logged and retried after
// a backoff of 5 ms doubling to 1 s.
func (p *Proxy) Serve(l net.Listener) error {
	if !p.track(l) {
		return net.ErrClosed
	}
	defer p.untrack(l)
	retry := retrier{ctx: p.ctx, log: p.cfg.Logger, what: "proxy accept"}
	for {
		c, err := l.Accept()
		if err != nil {
			if retry.again(err) {
				continue
			}
			return net.ErrClosed
		}
		retry.ok()
		tc, ok := c.(*net.TCPConn)
		if !ok {
			c.Close()
			continue
		}
		go p.handle(tc)
	}
}

func (p *Proxy) handle(tc *net.TCPConn) {
	sb, ok := p.cfg.Directory.SandboxByAddr(addrOf(tc.RemoteAddr()))
	if !ok {
		tc.Close()
		return // not a sandbox: nobody to log for
	}
	dst, err := p.cfg.OriginalDst(tc)
	if err != nil {
		tc.Close()
		p.refuse(sb, Event{Kind: "tcp", Reason: "no original destination"})
		return
	}
	ev := Event{Kind: "tcp", Address: dst.Addr().Unmap().String(), Port: int(dst.Port())}
	f, full := p.openFlow(sb, tc)
	if f == nil {
		tc.Close()
		if full != "" {
			p.refuse(sb, withReason(ev, full))
		}
		return
	}
	defer p.flows.done(f)
	c := f.wrap(tc)
	if c == nil || p.ctx.Err() != nil {
		return // the proxy or the sandbox is closing
	}
	if !sb.Policy.Internet {
		p.refuse(sb, withReason(ev, "internet off"))
		return
	}
	s := sniff(c, p.cfg.PeekTimeout, p.cfg.HeadTimeout)
	if s.gone {
		return
	}
	if s.proto == opaque && len(s.peeked) == 0 {
		var routed bool
		if s, routed = p.silent(c, f, sb, dst, ev); routed {
			return
		}
	}
	p.route(c, f, sb, s, dst, ev)
}

// route sends a connection that has been sniffed where the policy lets it
// go: through the secrets' TLS termination, the HTTP relay or a splice.
func (p *Proxy) route(c net.Conn, f *flow, sb Sandbox, s sniffed, dst netip.AddrPort, ev Event) {
	ev.Kind, ev.Name = s.proto.kind(), s.name
	// refuse logs the refusal and, to an HTTP client, says why.
	refuse := func(reason string) {
		p.refuse(sb, withReason(ev, reason))
		if s.proto == httpProto {
			write502(c, reason)
		}
	}
	if s.err != nil {
		refuse(fmt.Sprintf("%s: %v", map[protocol]string{tlsProto: "TLS ClientHello", httpProto: "HTTP request"}[s.proto], s.err))
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	defer cancel()
	addrs, name, reason := p.decide(ctx, sb, s, dst)
	ev.Name = name
	if reason != "" {
		refuse(reason)
		return
	}
	if s.proto == tlsProto && name != "" && !isIPLiteral(name) {
		bound, err := p.boundSecrets(sb.Account, name)
		if err != nil {
			p.refuse(sb, withReason(ev, "secrets unavailable"))
			return
		}
		if len(bound) > 0 {
			cancel()
			p.mitm(c, f, sb, s, addrs, dst.Port(), ev)
			return
		}
	}
	raw, addr, err := p.dial(ctx, addrs, dst.Port())
	if err != nil {
		refuse(err.Error())
		return
	}
	up := f.wrap(raw)
	if up == nil {
		return
	}
	ev.Address = addr.Addr().String()
	ev.Verdict = Allowed
	p.cfg.Log.Add(sb.ID, ev)
	cancel()
	if s.proto == httpProto {
		r := newRelay(p, f, sb, c, io.MultiReader(bytes.NewReader(s.peeked), c), name, ev)
		r.setUpstream(up)
		r.serve()
		return
	}
	if len(s.peeked) > 0 {
		if _, err := up.Write(s.peeked); err != nil {
			return
		}
	}
	splice(c, c, up, up, f)
}

// openFlow takes a connection slot for c of sandbox sb, or returns the
// limit that refuses it; neither when the sandbox stopped running since
// it was looked up. Looking again once the flow is in the table closes
// the gap in which a sandbox being paused could get a connection past
// its CloseFlows: either this lookup already misses it, or CloseFlows
// (which comes after the Directory forgets it) finds the flow.
func (p *Proxy) openFlow(sb Sandbox, c net.Conn) (*flow, string) {
	f, full := p.flows.open(sb.ID, sb.Account, p.cfg.IdleTimeout)
	if f == nil {
		return nil, full
	}
	if now, ok := p.cfg.Directory.SandboxByAddr(addrOf(c.RemoteAddr())); !ok || now.ID != sb.ID {
		p.flows.done(f)
		return nil, ""
	}
	return f, ""
}

// decide applies the policy to a connection: the addresses to try, or the
// reason it is refused. Named traffic (a TLS server name, an HTTP Host)
// goes only to addresses the proxy resolves itself, never to the original
// destination; opaque TCP goes to the original destination only when the
// resolver handed it to this sandbox for a name the policy allows (or when
// the policy allows everything).
func (p *Proxy) decide(ctx context.Context, sb Sandbox, s sniffed, dst netip.AddrPort) (addrs []netip.Addr, name, reason string) {
	pol := sb.Policy
	name = s.name
	if s.proto == opaque || name == "" {
		switch {
		case p.blocked.Blocked(dst.Addr()):
			return nil, "", "blocked address"
		case !pol.restricted(), pol.AllowsAddr(dst.Addr()):
			return []netip.Addr{dst.Addr().Unmap()}, "", ""
		case s.proto == tlsProto:
			return nil, "", "no server name"
		case s.proto == httpProto:
			return nil, "", "no Host"
		}
		for _, n := range p.resolver.HandedOut(sb.ID, dst.Addr()) {
			if pol.Allows(n) {
				return []netip.Addr{dst.Addr().Unmap()}, n, ""
			}
		}
		return nil, "", "address not resolved for an allowed name"
	}
	if isIPLiteral(name) {
		lit, err := netip.ParseAddr(name)
		switch {
		case err != nil && pol.restricted():
			return nil, name, "IP literal with an allow list"
		case err != nil:
			return nil, name, "numeric host name"
		case pol.restricted() && !pol.AllowsAddr(lit):
			return nil, name, "IP literal not in the allow list"
		case p.blocked.Blocked(lit):
			return nil, name, "blocked address"
		}
		return []netip.Addr{lit.Unmap()}, name, ""
	}
	if err := checkHostname(name); err != nil {
		return nil, name, "bad name: " + err.Error()
	}
	byName := pol.Allows(name)
	if !byName && !pol.hasAddrs() {
		return nil, name, "name not allowed"
	}
	addrs, err := p.resolver.Lookup(ctx, name)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, name, "no usable address"
		}
		return nil, name, "not resolved"
	}
	if !byName {
		// A name the list does not name reaches only the addresses of
		// it that an address entry covers.
		addrs = slices.DeleteFunc(addrs, func(a netip.Addr) bool { return !pol.AllowsAddr(a) })
		if len(addrs) == 0 {
			return nil, name, "name not allowed"
		}
	}
	return addrs, name, ""
}

// boundSecrets are the account's secrets bound to host, read now so that
// changes apply to the next request.
func (p *Proxy) boundSecrets(account, host string) ([]Secret, error) {
	if p.cfg.Secrets == nil || p.cfg.CA == nil {
		return nil, nil
	}
	all, err := p.cfg.Secrets.ForAccount(account)
	if err != nil {
		return nil, err
	}
	var bound []Secret
	for _, s := range all {
		if s.Placeholder != "" && s.Value != "" && matchHost(s.Host, host) {
			bound = append(bound, s)
		}
	}
	return bound, nil
}

// dial connects to the first of addrs that is not Blocked and answers, on
// port.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, port uint16) (net.Conn, netip.AddrPort, error) {
	err := errors.New("no address")
	for _, a := range addrs {
		if p.blocked.Blocked(a) {
			err = errors.New("blocked address")
			continue
		}
		ap := netip.AddrPortFrom(a, port)
		c, derr := p.cfg.Dial(ctx, "tcp", ap.String())
		if derr == nil {
			return c, ap, nil
		}
		err = derr
	}
	return nil, netip.AddrPort{}, fmt.Errorf("upstream unreachable: %s", shortErr(err))
}

// shortErr keeps the end of an error chain: "connection refused" rather
// than the whole "dial tcp ...: connect: connection refused".
func shortErr(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
		var se interface{ Unwrap() error }
		for errors.As(err, &se) && se.Unwrap() != nil {
			err = se.Unwrap()
		}
	}
	return err.Error()
}

func (p *Proxy) refuse(sb Sandbox, e Event) {
	e.Verdict = Refused
	p.cfg.Log.Add(sb.ID, e)
}

func withReason(e Event, reason string) Event {
	e.Reason = reason
	return e
}

// splice copies from ar to b and from br to a (a's and b's readers,
// holding bytes already buffered) until both directions end, passing
// half-closes on. An error in one direction, or a side that cannot
// half-close, ends both; once one direction has ended, the flow f of the
// connections gives the other halfClosedIdle of silence, not its whole
// idle timeout, so that a peer that left cannot keep the other end open
// (CLOSE-WAIT) for long.
func splice(a net.Conn, ar io.Reader, b net.Conn, br io.Reader, f *flow) {
	errc := make(chan error, 2)
	cp := func(dst net.Conn, src io.Reader) {
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); !ok {
			err = io.EOF
		} else if err == nil {
			err = cw.CloseWrite()
		}
		errc <- err
	}
	go cp(a, br)
	go cp(b, ar)
	if err := <-errc; err != nil {
		a.Close()
		b.Close()
	} else if f != nil {
		f.shorten(halfClosedIdle)
	}
	<-errc
}

// addrOf is the IP address of a TCP or UDP network address, unmapped.
func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}
