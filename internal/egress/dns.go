package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const (
	// dnsTTL is the TTL of the answers: short, so that policy changes and
	// the resolver's own view reach clients soon.
	dnsTTL = 60
	// maxAnswers keeps a UDP answer well inside 512 bytes.
	maxAnswers = 8
	// maxInflightUDP bounds the UDP queries being answered at once, of
	// every sandbox (each has its own, smaller bound: Config.DNSInflight);
	// more are dropped, and the client retries.
	maxInflightUDP = 1024
	// dnsTCPIdle closes an idle DNS-over-TCP connection.
	dnsTCPIdle = 10 * time.Second
	// dnsLookupTimeout bounds the host resolver's answer: the client
	// retries sooner than that anyway.
	dnsLookupTimeout = 5 * time.Second
)

// ServeDNS answers the sandboxes' DNS queries on udp and on tcp (either
// may be nil) until ctx is done, the proxy is closed or they are, and then
// closes them; it returns nil then, or an error if one was closed under
// it (which stops the other too). Any other error of a read or an accept
// is logged and retried after a backoff, as Serve does. A query from an
// address that is no sandbox's is REFUSED and logged nowhere. A sandbox's
// queries past its rate (Config.DNSQueriesPerSecond) or its concurrency
// (Config.DNSInflight) are REFUSED and logged, and its DNS-over-TCP
// connections count against its connection limits (Config.MaxConns,
// MaxConnsAccount, MaxConnsHost). A query for a name the sandbox's policy
// does not allow, a name longer than 253 bytes or with a label longer
// than 63, or one name too many in a minute (Config.DNSNamesPerMinute) is
// REFUSED and logged in the sandbox's egress log: so that DNS carries
// nothing out. An A query
// gets the Resolver's addresses; AAAA an empty answer (sandboxes have no
// IPv6); any other type REFUSED. An allowed name the Resolver has no
// usable address for gets NXDOMAIN, and one it could not look up
// SERVFAIL: both logged as allowed, the reason saying why the lookup
// failed.
func (p *Proxy) ServeDNS(ctx context.Context, udp net.PacketConn, tcp net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	var closers []io.Closer
	if udp != nil {
		closers = append(closers, udp)
	}
	if tcp != nil {
		closers = append(closers, tcp)
	}
	if len(closers) == 0 {
		return errors.New("ServeDNS: no connection to serve")
	}
	context.AfterFunc(ctx, func() {
		for _, c := range closers {
			c.Close()
		}
	})
	errc := make(chan error, 2)
	if udp != nil {
		go func() { errc <- p.serveUDP(ctx, udp) }()
	}
	if tcp != nil {
		go func() { errc <- p.serveTCP(ctx, tcp) }()
	}
	var first error
	for range closers {
		if err := <-errc; err != nil && first == nil && ctx.Err() == nil {
			first = err
			cancel()
		}
	}
	return first
}

func (p *Proxy) serveUDP(ctx context.Context, pc net.PacketConn) error {
	inflight := make(chan struct{}, maxInflightUDP)
	buf := make([]byte, 64<<10)
	retry := retrier{ctx: ctx, log: p.cfg.Logger, what: "DNS over UDP read"}
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if retry.again(err) {
				continue
			}
			return stopped(ctx, "DNS over UDP", err)
		}
		retry.ok()
		select {
		case inflight <- struct{}{}:
		default:
			continue
		}
		query := append([]byte(nil), buf[:n]...)
		go func() {
			defer func() { <-inflight }()
			if resp := p.answer(ctx, addrOf(from), query); resp != nil {
				pc.WriteTo(resp, from)
			}
		}()
	}
}

func (p *Proxy) serveTCP(ctx context.Context, l net.Listener) error {
	retry := retrier{ctx: ctx, log: p.cfg.Logger, what: "DNS over TCP accept"}
	for {
		c, err := l.Accept()
		if err != nil {
			if retry.again(err) {
				continue
			}
			return stopped(ctx, "DNS over TCP", err)
		}
		retry.ok()
		go p.serveDNSConn(ctx, c)
	}
}

// stopped is what a DNS loop returns when it ends: nil when asked to (ctx
// done), else err: its socket was closed under it, which ends ServeDNS.
func stopped(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (p *Proxy) serveDNSConn(ctx context.Context, c net.Conn) {
	if !p.track(c) {
		return
	}
	defer p.untrack(c)
	defer c.Close()
	if sb, ok := p.cfg.Directory.SandboxByAddr(addrOf(c.RemoteAddr())); ok {
		f, full := p.openFlow(sb, c)
		if f == nil {
			if full != "" {
				p.refuse(sb, Event{Kind: "dns", Port: 53, Reason: full})
			}
			return
		}
		defer p.flows.done(f)
		if c = f.wrap(c); c == nil {
			return
		}
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	src := addrOf(c.RemoteAddr())
	var size [2]byte
	for {
		c.SetDeadline(time.Now().Add(dnsTCPIdle))
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		query := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, query); err != nil {
			return
		}
		resp := p.answer(ctx, src, query)
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(resp)), uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// answer answers one query from src; nil means no answer at all (not a
// query).
func (p *Proxy) answer(ctx context.Context, src netip.Addr, query []byte) []byte {
	var parser dnsmessage.Parser
	h, err := parser.Start(query)
	if err != nil || h.Response {
		return nil
	}
	sb, ok := p.cfg.Directory.SandboxByAddr(src)
	if !ok {
		return reply(h, nil, dnsmessage.RCodeRefused, nil)
	}
	refuse := func(q *dnsmessage.Question, name, reason string) []byte {
		p.refuse(sb, Event{Kind: "dns", Name: name, Port: 53, Reason: reason})
		return reply(h, q, dnsmessage.RCodeRefused, nil)
	}
	q, err := parser.Question()
	if err != nil {
		// Among others: a label longer than 63 bytes or a name longer
		// than 255 cannot even be parsed.
		return refuse(nil, "", "malformed query")
	}
	if _, err := parser.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return refuse(nil, "", "several questions")
	}
	name := normalize(q.Name.String())
	end, limit := p.dnsLimit.begin(sb.ID)
	if limit != "" {
		return refuse(&q, truncate(name), limit)
	}
	defer end()
	if h.OpCode != 0 || q.Class != dnsmessage.ClassINET {
		return reply(h, &q, dnsmessage.RCodeRefused, nil)
	}
	if err := checkHostname(name); err != nil {
		return refuse(&q, truncate(name), "bad name: "+err.Error())
	}
	if !sb.Policy.Internet {
		// As the proxy says of a connection: the policy, not the name.
		return refuse(&q, name, "internet off")
	}
	byName := sb.Policy.Allows(name)
	if !byName && !sb.Policy.hasAddrs() {
		return refuse(&q, name, "name not allowed")
	}
	if q.Type != dnsmessage.TypeA && q.Type != dnsmessage.TypeAAAA {
		return reply(h, &q, dnsmessage.RCodeRefused, nil)
	}
	if !p.names.allow(sb.ID, name, time.Now()) {
		return refuse(&q, name, "too many names")
	}
	if q.Type == dnsmessage.TypeAAAA {
		return reply(h, &q, dnsmessage.RCodeSuccess, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, dnsLookupTimeout)
	defer cancel()
	addrs, err := p.resolver.Answer(ctx, sb.ID, name)
	if err != nil {
		// The policy allowed the name: the answer is no refusal, but
		// it is why the sandbox's connection never came.
		p.cfg.Log.Add(sb.ID, Event{Kind: "dns", Name: name, Port: 53, Verdict: Allowed, Reason: lookupFailure(err)})
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return reply(h, &q, dnsmessage.RCodeNameError, nil)
	case err != nil:
		return reply(h, &q, dnsmessage.RCodeServerFailure, nil)
	}
	if !byName {
		// A name the list does not name is answered with only the
		// addresses its address entries cover, as the proxy connects.
		addrs = slices.DeleteFunc(addrs, func(a netip.Addr) bool { return !sb.Policy.AllowsAddr(a) })
		if len(addrs) == 0 {
			return refuse(&q, name, "name not allowed")
		}
	}
	return reply(h, &q, dnsmessage.RCodeSuccess, addrs)
}

// reply builds the response to the query with header h: its question (if
// parsed), rcode and A records for addrs.
func reply(h dnsmessage.Header, q *dnsmessage.Question, rcode dnsmessage.RCode, addrs []netip.Addr) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{
		ID:                 h.ID,
		Response:           true,
		OpCode:             h.OpCode,
		RecursionDesired:   h.RecursionDesired,
		RecursionAvailable: true,
		RCode:              rcode,
	})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil
	}
	if q != nil {
		if err := b.Question(*q); err != nil {
			return nil
		}
	}
	if err := b.StartAnswers(); err != nil {
		return nil
	}
	for i, a := range addrs {
		if i == maxAnswers {
			break
		}
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL}
		if err := b.AResource(rh, dnsmessage.AResource{A: a.As4()}); err != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// truncate keeps a refused name short enough for the log.
func truncate(name string) string {
	if len(name) > 80 {
		return name[:80] + "..."
	}
	return name
}

// nameLimiter counts the distinct names each sandbox resolves per minute.
type nameLimiter struct {
	max int

	mu      sync.Mutex // guards windows
	windows map[string]*nameWindow
}

type nameWindow struct {
	start time.Time
	names map[string]struct{}
}

func newNameLimiter(max int) *nameLimiter {
	return &nameLimiter{max: max, windows: map[string]*nameWindow{}}
}

// allow reports whether sandbox id may resolve name now: a name already
// seen in the current minute always, a new one while fewer than max were.
func (l *nameLimiter) allow(id, name string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[id]
	if w == nil || now.Sub(w.start) >= time.Minute {
		if len(l.windows) > 1000 {
			for k, old := range l.windows {
				if now.Sub(old.start) >= time.Minute {
					delete(l.windows, k)
				}
			}
		}
		w = &nameWindow{start: now, names: map[string]struct{}{}}
		l.windows[id] = w
	}
	if _, ok := w.names[name]; ok {
		return true
	}
	if len(w.names) >= l.max {
		return false
	}
	w.names[name] = struct{}{}
	return true
}

func (l *nameLimiter) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.windows, id)
}
