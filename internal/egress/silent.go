package egress

import (
	"context"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
)

// Who spoke first on a connection that was silent past the peek timeout.
const (
	nobody int32 = iota
	clientFirst
	serverFirst
)

// silent handles a connection that said nothing within the peek timeout.
// Silence alone does not make it server-first: a slow client (a loaded
// host, an emulated CPU, a TLS library reading its roots) may still be
// about to send a ClientHello, and taking it for opaque TCP would splice
// it past the secrets' termination and the HTTP relay's checks. So the
// destination opaque TCP may reach is dialed, and whoever speaks first
// decides: the server (or its close) makes the connection opaque and it is
// spliced with what both said; the client's first bytes are sniffed as
// usual, and unless they too are opaque the dial is dropped and the caller
// routes them by name. Where opaque TCP may not go (or its dial fails),
// only the client can speak. routed is true when the connection was dealt
// with here (spliced or refused).
func (p *Proxy) silent(c net.Conn, f *flow, sb Sandbox, dst netip.AddrPort, ev Event) (s sniffed, routed bool) {
	addrs, name, reason := p.decide(p.ctx, sb, sniffed{proto: opaque}, dst)
	ev.Name = name
	var up net.Conn
	var addr netip.AddrPort
	if reason == "" {
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
		raw, a, err := p.dial(ctx, addrs, dst.Port())
		cancel()
		if err != nil {
			reason = err.Error()
		} else if up, addr = f.wrap(raw), a; up == nil {
			return sniffed{}, true // the flow is closing
		}
	}
	if up == nil {
		// No server can speak here, so the client has the head timeout
		// to say what it is; still silent, it is refused as opaque TCP.
		if s = sniff(c, p.cfg.HeadTimeout, p.cfg.HeadTimeout); s.proto == opaque && len(s.peeked) == 0 {
			p.refuse(sb, withReason(ev, reason))
			return sniffed{}, true
		}
		return s, false
	}

	var first atomic.Int32
	said := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 4096)
		n, err := up.Read(buf)
		if (n > 0 || err != nil) && first.CompareAndSwap(nobody, serverFirst) {
			c.SetReadDeadline(time.Now()) // stops the client's sniff
		}
		said <- buf[:n]
	}()
	// The flow's idle timer bounds a connection on which neither speaks.
	s = sniff(&firstReader{Conn: c, first: &first}, p.cfg.IdleTimeout, p.cfg.HeadTimeout)
	up.SetReadDeadline(time.Now())
	answer := <-said
	up.SetReadDeadline(time.Time{})
	c.SetReadDeadline(time.Time{})

	if first.Load() == clientFirst && s.proto != opaque {
		up.Close() // routed by its name, to addresses resolved afresh
		return s, false
	}
	if s.gone && len(answer) == 0 {
		up.Close()
		return sniffed{}, true
	}
	ev.Address = addr.Addr().String()
	ev.Verdict = Allowed
	p.cfg.Log.Add(sb.ID, ev)
	if len(answer) > 0 {
		if _, err := c.Write(answer); err != nil {
			return sniffed{}, true
		}
	}
	if len(s.peeked) > 0 {
		if _, err := up.Write(s.peeked); err != nil {
			return sniffed{}, true
		}
	}
	splice(c, c, up, up, f)
	return sniffed{}, true
}

// firstReader marks the client as the first to speak when a read of it
// returns bytes before the server has said anything, and ends the sniff
// once the server has: the server's deadline of now may have come before
// one the sniff set itself, so every read checks.
type firstReader struct {
	net.Conn
	first *atomic.Int32
}

func (r *firstReader) Read(b []byte) (int, error) {
	if r.first.Load() == serverFirst {
		return 0, os.ErrDeadlineExceeded
	}
	n, err := r.Conn.Read(b)
	if n > 0 {
		r.first.CompareAndSwap(nobody, clientFirst)
	}
	return n, err
}
