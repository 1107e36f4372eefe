package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/netip"
)

// mitm terminates a sandbox's TLS connection to a host with secrets: with
// a certificate for its server name from the installation's CA, offering
// HTTP/1.1 only, so that no connection ever carries a second authority.
// The requests are relayed one by one to the real host over a verified
// TLS connection, opened when the first request has been checked.
func (p *Proxy) mitm(c net.Conn, f *flow, sb Sandbox, s sniffed, addrs []netip.Addr, port uint16, ev Event) {
	cert, err := p.cfg.CA.Leaf(s.name)
	if err != nil {
		p.refuse(sb, withReason(ev, "no certificate for the name"))
		return
	}
	tc := tls.Server(&replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(s.peeked), c)}, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.HeadTimeout)
	err = tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		p.refuse(sb, withReason(ev, "TLS handshake with the sandbox failed"))
		return
	}
	r := newRelay(p, f, sb, tc, tc, s.name, ev)
	r.terminated = true
	r.connect = func() (net.Conn, string) { return p.connectTLS(r, addrs, port) }
	r.serve() // the flow closes r.up
	if !r.cut {
		// A close_notify: TLS clients (curl among them) take a close
		// without one as a truncation, which would fail every body that
		// ends with the connection.
		tc.Close()
	}
}

// connectTLS opens the TLS connection to the real host on the original
// port, verifying its certificate for the server name against the
// system's roots and Config.ExtraRoots. Nothing of a request is sent
// before this succeeds.
func (p *Proxy) connectTLS(r *relay, addrs []netip.Addr, port uint16) (net.Conn, string) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	defer cancel()
	raw, addr, err := p.dial(ctx, addrs, port)
	if err != nil {
		return nil, err.Error()
	}
	counted := r.flow.wrap(raw)
	if counted == nil {
		return nil, "connection closed"
	}
	r.ev.Address = addr.Addr().String()
	up := tls.Client(counted, &tls.Config{
		ServerName: r.host,
		RootCAs:    p.roots,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	fail := func(reason string) (net.Conn, string) {
		up.Close()
		return nil, reason
	}
	if err := up.HandshakeContext(ctx); err != nil {
		var verr *tls.CertificateVerificationError
		var uerr x509.UnknownAuthorityError
		var herr x509.HostnameError
		if errors.As(err, &verr) || errors.As(err, &uerr) || errors.As(err, &herr) {
			return fail("upstream certificate not trusted")
		}
		return fail("upstream TLS handshake failed")
	}
	if proto := up.ConnectionState().NegotiatedProtocol; proto != "" && proto != "http/1.1" {
		return fail("upstream chose " + proto)
	}
	ev := r.ev
	ev.Verdict, ev.Reason = Allowed, "TLS terminated: secrets bound to this host"
	p.cfg.Log.Add(r.sb.ID, ev)
	return up, ""
}

// replayConn reads the bytes already peeked before the connection's own.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }
