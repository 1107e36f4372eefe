package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

const (
	// maxRequestHead bounds a request's line and headers: the relay's read
	// buffer, which must hold a whole head.
	maxRequestHead = 64 << 10
	// idleTimeout closes a kept-alive connection with no next request.
	idleTimeout = 2 * time.Minute
	// writeGrace is how long a request body may still be flowing after
	// the final response was relayed before the connection is dropped
	// rather than reused.
	writeGrace = 2 * time.Second
)

// relay carries a sandbox's HTTP/1.x requests to one upstream connection,
// one request at a time, checking each: a plain HTTP connection, or a TLS
// connection the proxy terminated because the host has secrets. The first
// request decided which upstream the connection reaches; later ones must
// name the same host (always when terminated, and whenever the policy has
// an allow list), so a kept-alive connection cannot be reused to reach
// another name behind the same address.
type relay struct {
	p          *Proxy
	flow       *flow // the connection's: closes both ends when idle
	sb         Sandbox
	src        netip.Addr
	host       string // the connection's host: the server name, or the first request's
	terminated bool   // secrets are swapped in and scrubbed out
	ev         Event
	// cut is set when a response could not be relayed whole: the
	// sandbox's end must then not look closed on purpose (no TLS
	// close_notify), so that a body ended by the close shows as cut.
	cut bool

	client net.Conn
	cbr    *bufio.Reader
	cbw    *bufio.Writer
	up     net.Conn // nil until connect opens it
	ubr    *bufio.Reader
	ubw    *bufio.Writer
	// connect opens up before the first request is forwarded, or returns
	// why it cannot.
	connect func() (net.Conn, string)
}

func newRelay(p *Proxy, f *flow, sb Sandbox, client net.Conn, clientReader io.Reader, host string, ev Event) *relay {
	return &relay{
		p: p, flow: f, sb: sb, src: addrOf(client.RemoteAddr()), host: host, ev: ev,
		client: client, cbr: bufio.NewReaderSize(clientReader, maxRequestHead), cbw: bufio.NewWriter(client),
	}
}

func (r *relay) setUpstream(up net.Conn) {
	r.up, r.ubr, r.ubw = up, bufio.NewReader(up), bufio.NewWriter(up)
}

func (r *relay) serve() {
	for {
		r.client.SetReadDeadline(time.Now().Add(idleTimeout))
		head, err := peekHead(r.cbr)
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				r.fail("", "request head too large")
			}
			return
		}
		hosts, err := headHosts(head)
		if err != nil {
			r.fail("", err.Error())
			return
		}
		req, err := http.ReadRequest(r.cbr)
		r.client.SetReadDeadline(time.Time{})
		if err != nil {
			r.fail("", "malformed request")
			return
		}
		host, bound, reason := r.check(hosts, req)
		if reason != "" {
			r.fail(host, reason)
			return
		}
		if r.up == nil {
			up, reason := r.connect()
			if reason != "" {
				r.fail(host, reason)
				return
			}
			r.setUpstream(up)
		}
		if !r.roundTrip(req, bound) {
			return
		}
	}
}

// check decides one request by the sandbox's policy as it is now. It
// returns the request's host and, on a terminated connection, the secrets
// bound to the host as they are now.
func (r *relay) check(hosts []string, req *http.Request) (string, []Secret, string) {
	host, err := requestHost(hosts, req)
	if err != nil {
		return "", nil, err.Error()
	}
	if req.Method == http.MethodConnect {
		return host, nil, "CONNECT"
	}
	sb, ok := r.p.cfg.Directory.SandboxByAddr(r.src)
	switch {
	case !ok || sb.ID != r.sb.ID:
		return host, nil, "sandbox gone"
	case !sb.Policy.Internet:
		return host, nil, "internet off"
	case r.terminated && host != r.host:
		return host, nil, "Host differs from the TLS server name"
	case sb.Policy.restricted() && host != r.host:
		return host, nil, "Host differs from the connection's first request"
	case sb.Policy.restricted() && host == "":
		return host, nil, "no Host"
	case sb.Policy.restricted() && isIPLiteral(host) && !literalAllowed(sb.Policy, host):
		return host, nil, "IP literal not in the allow list"
	case host != "" && !isIPLiteral(host) && !sb.Policy.Allows(host) && !r.upstreamAllowed(sb.Policy):
		return host, nil, "name not allowed"
	}
	if !r.terminated {
		return host, nil, ""
	}
	bound, err := r.p.boundSecrets(sb.Account, r.host)
	if err != nil {
		return host, nil, "secrets unavailable"
	}
	return host, bound, ""
}

// literalAllowed reports whether an IP literal host is an address the
// policy's address entries cover (numeric forms other than netip's never
// are).
func literalAllowed(pol Policy, host string) bool {
	a, err := netip.ParseAddr(host)
	return err == nil && pol.AllowsAddr(a)
}

// upstreamAllowed reports whether the connection's upstream is an address
// the policy's address entries cover: a name the list does not name is
// relayed only while the address it reached stays allowed. Before the
// upstream is dialed (TLS termination dials at the first request) the
// decision that routed the connection stands: it kept only such addresses.
func (r *relay) upstreamAllowed(pol Policy) bool {
	if !pol.hasAddrs() {
		return false
	}
	if r.up == nil {
		return true
	}
	return pol.AllowsAddr(addrOf(r.up.RemoteAddr()))
}

// roundTrip forwards one request and relays its responses. On a
// terminated connection the request's headers get the secrets' values
// (unless it asks for a protocol upgrade, after which bytes flow
// unexamined) and the responses are scrubbed. It reports whether the
// connection may carry another request.
func (r *relay) roundTrip(req *http.Request, bound []Secret) bool {
	upgrade := req.Header.Get("Upgrade") != ""
	if upgrade {
		bound = nil
	}
	swapHeaders(req.Header, bound)
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // Write would add Go's own
	}
	if req.Body != http.NoBody && req.Body != nil {
		req.Body = &bodyReader{src: req.Body, flush: r.ubw}
	}
	wrote := make(chan error, 1)
	go func() {
		err := req.Write(writerOnly{r.ubw})
		if err == nil {
			err = r.ubw.Flush()
		}
		if err != nil {
			r.up.Close() // no response will come: unblock the reader
		}
		wrote <- err
	}()
	for {
		resp, err := http.ReadResponse(r.ubr, req)
		if err != nil {
			r.fail(r.host, "no response from upstream")
			return false
		}
		scrubHeaders(resp.Header, bound)
		resp.Status = scrubString(resp.Status, bound)
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			if !upgrade {
				r.fail(r.host, "upstream switched protocols unasked")
				return false
			}
			if resp.Write(r.cbw) != nil || r.cbw.Flush() != nil || <-wrote != nil {
				return false
			}
			splice(r.client, r.cbr, r.up, r.ubr, r.flow)
			return false
		case resp.StatusCode < 200:
			if resp.Write(r.cbw) != nil || r.cbw.Flush() != nil {
				return false
			}
			continue
		}
		prepareBody(req, resp, bound, r.cbw)
		if resp.Write(writerOnly{r.cbw}) != nil || r.cbw.Flush() != nil {
			r.cut = true
			return false
		}
		select {
		case err := <-wrote:
			if err != nil {
				return false
			}
		case <-time.After(writeGrace):
			return false // the upstream answered before it had the request
		}
		return !req.Close && !resp.Close && req.ProtoAtLeast(1, 1)
	}
}

// prepareBody sets up a response's body for relaying to w: flushed as it
// streams, the values of bound in it replaced by placeholders when it is
// not content-encoded (a compressed or otherwise encoded echo cannot be
// recognized), trailers scrubbed at its end.
func prepareBody(req *http.Request, resp *http.Response, bound []Secret, w *bufio.Writer) {
	if !req.ProtoAtLeast(1, 1) && len(resp.TransferEncoding) > 0 {
		resp.TransferEncoding, resp.ContentLength, resp.Close = nil, -1, true
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	b := &bodyReader{src: resp.Body, flush: w}
	if len(bound) > 0 {
		b.onEOF = func() { scrubHeaders(resp.Trailer, bound) }
		if enc := resp.Header.Get("Content-Encoding"); enc == "" || strings.EqualFold(enc, "identity") {
			b.rep = newReplacer(bound)
			resp.ContentLength = -1
			resp.Header.Del("Content-Length")
		}
	}
	if resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 {
		reframe(req, resp)
	}
	resp.Body = b
}

// reframe frames a body of unknown length for the sandbox: chunked to an
// HTTP/1.1 client, whatever the upstream's version (so that the body's
// end is in the stream, not in how the connection ends, and a body cut
// short shows), under an HTTP/1.1 status line since HTTP/1.0 has no
// chunks; ended by the connection's close to an HTTP/1.0 client, which
// cannot be sent chunks (on a terminated connection the close is then a
// TLS close_notify: see relay.cut).
func reframe(req *http.Request, resp *http.Response) {
	resp.Header.Del("Content-Length")
	if !req.ProtoAtLeast(1, 1) {
		resp.TransferEncoding, resp.Close = nil, true
		return
	}
	resp.TransferEncoding = []string{"chunked"}
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
}

// fail answers the sandbox 502 with reason and logs the refusal; nothing
// of the request is forwarded.
func (r *relay) fail(host, reason string) {
	ev := r.ev
	ev.Kind = "http"
	if host != "" {
		ev.Name = host
	}
	r.p.refuse(r.sb, withReason(ev, reason))
	write502(r.cbw, reason)
	r.cbw.Flush()
}

// write502 answers an HTTP client that its request was refused, and why.
// The reason is the proxy's own words, never anything from the upstream.
func write502(w io.Writer, reason string) {
	msg := "egress: " + reason + "\n"
	fmt.Fprintf(w, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(msg), msg)
}

// peekHead waits until br holds a whole request head and returns it,
// unconsumed. A head that does not fit br's buffer fails with
// bufio.ErrBufferFull.
func peekHead(br *bufio.Reader) ([]byte, error) {
	for n := 1; ; n = br.Buffered() + 1 {
		_, err := br.Peek(n)
		b, _ := br.Peek(br.Buffered())
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			return b[:i+4], nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// headHosts returns the Host header values of a raw request head, which
// http.ReadRequest drops. Folded lines and several Host headers are
// refused: either could make two parsers disagree on the host.
func headHosts(head []byte) ([]string, error) {
	var hosts []string
	lines := strings.Split(string(head), "\r\n")
	for _, line := range lines[1:] {
		if line != "" && (line[0] == ' ' || line[0] == '\t') {
			return nil, errors.New("folded header line")
		}
		if name, value, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(name), "host") {
			hosts = append(hosts, strings.TrimSpace(value))
		}
	}
	if len(hosts) > 1 {
		return nil, errors.New("several Host headers")
	}
	return hosts, nil
}

// bracketsWhole reports whether the brackets of a Host value, if any,
// enclose its whole host: "[addr]" or "[addr]:port", one pair. Anything
// else ("[::%1a]]x") reads one way here and another once Request.Write
// has cut its zone.
func bracketsWhole(h string) bool {
	if !strings.ContainsAny(h, "[]") {
		return true
	}
	end := strings.IndexByte(h, ']')
	if h[0] != '[' || end < 0 || strings.ContainsAny(h[1:end], "[]") {
		return false
	}
	rest := h[end+1:]
	return rest == "" || rest[0] == ':' && strings.Trim(rest[1:], "0123456789") == ""
}

// requestHost is a request's host, normalized, without port: the
// absolute-form target's host or the Host header, which must agree when
// both are given.
func requestHost(hosts []string, req *http.Request) (string, error) {
	// As for the first request (sniff.go): a Host net/http would not
	// forward as it is gets no decision.
	if !validHost(req.Host) || !bracketsWhole(req.Host) {
		return "", errors.New("malformed Host")
	}
	// Only a target that Request.Write sends on as it came: an opaque URL
	// or another scheme ("a:a://name") would be rewritten into a target
	// that names a host the policy never saw.
	if u := req.URL; u.Opaque != "" || u.Scheme != "" && u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.New("malformed request target")
	}
	host := hostOnly(req.Host)
	if len(hosts) == 1 && hostOnly(hosts[0]) != host {
		return "", errors.New("request target's host differs from Host")
	}
	return host, nil
}
