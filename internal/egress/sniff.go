package egress

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"
)

// protocol is what the first bytes of a connection say it is.
type protocol int

const (
	opaque protocol = iota
	tlsProto
	httpProto
)

func (p protocol) kind() string {
	switch p {
	case tlsProto:
		return "tls"
	case httpProto:
		return "http"
	}
	return "tcp"
}

// maxHead bounds what the proxy reads before it decides: a ClientHello or
// an HTTP request head.
const maxHead = 64 << 10

// sniffed is what the proxy learnt from a connection's first bytes.
type sniffed struct {
	proto  protocol
	name   string // TLS server name or HTTP host, without port; "" when absent
	peeked []byte // bytes read, to replay upstream
	err    error  // malformed or incomplete TLS or HTTP: refuse
	gone   bool   // closed or failed before saying anything: just close
}

// sniff reads the first bytes of c. A client that says nothing within
// peekTimeout is speaking a server-first protocol (ssh, smtp): opaque.
// Once it has spoken, it has headTimeout to finish a ClientHello or a
// request head.
func sniff(c net.Conn, peekTimeout, headTimeout time.Duration) sniffed {
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 0, 4096)
	c.SetReadDeadline(time.Now().Add(peekTimeout))
	deadlineSet := false
	var cl classifier
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > 0 && !deadlineSet {
			c.SetReadDeadline(time.Now().Add(headTimeout))
			deadlineSet = true
		}
		s := cl.classify(buf)
		if s.done {
			return sniffed{proto: s.proto, name: s.name, peeked: buf, err: s.err}
		}
		if len(buf) >= maxHead {
			if s.proto == opaque {
				return sniffed{proto: opaque, peeked: buf}
			}
			return sniffed{proto: s.proto, peeked: buf, err: errors.New("too large")}
		}
		if err != nil {
			if len(buf) == 0 && !errors.Is(err, os.ErrDeadlineExceeded) {
				return sniffed{gone: true}
			}
			if s.proto == opaque {
				return sniffed{proto: opaque, peeked: buf}
			}
			return sniffed{proto: s.proto, peeked: buf, err: errors.New("incomplete")}
		}
	}
}

// classification is classify's verdict on the bytes so far: done, or the
// protocol they look like until more arrive (opaque: cannot tell yet).
type classification struct {
	proto protocol
	done  bool
	name  string
	err   error
}

// classify classifies b from scratch.
func classify(b []byte) classification {
	var c classifier
	return c.classify(b)
}

// classifier classifies a connection's first bytes as they arrive: each
// call is given all the bytes so far. It remembers what it has seen, so
// that a client sending a byte at a time costs linear work, not a parse of
// the whole buffer per byte.
type classifier struct {
	hello helloReader
	// isHTTP: the request line was seen and is HTTP/1.x.
	isHTTP bool
	// scanned is how many bytes were searched for the end of the request
	// line, then of the head, without finding it.
	scanned int
}

func (c *classifier) classify(b []byte) classification {
	if len(b) == 0 {
		return classification{}
	}
	if b[0] == 0x16 {
		if len(b) >= 2 && b[1] != 0x03 {
			return classification{proto: opaque, done: true}
		}
		name, complete, err := c.hello.feed(b)
		return classification{proto: tlsProto, done: complete || err != nil, name: name, err: err}
	}
	return c.classifyHTTP(b)
}

// classifyHTTP recognises an HTTP/1.x request: a method token, a target
// and HTTP/1.0 or HTTP/1.1 on the first line.
func (c *classifier) classifyHTTP(b []byte) classification {
	if !c.isHTTP {
		i := 0
		for ; i < len(b) && i <= 20 && 'A' <= b[i] && b[i] <= 'Z'; i++ {
		}
		switch {
		case i == len(b) && i <= 20:
			return classification{} // a method, perhaps: wait
		case i == 0 || i > 20 || b[i] != ' ':
			return classification{proto: opaque, done: true}
		}
		eol := bytes.IndexByte(b[c.scanned:], '\n')
		if eol < 0 {
			c.scanned = len(b)
			return classification{} // still the request line: cannot tell
		}
		eol += c.scanned
		parts := strings.Fields(string(b[:eol]))
		if len(parts) != 3 || (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") {
			return classification{proto: opaque, done: true}
		}
		c.isHTTP = true
		c.scanned = eol
	}
	// The head's end may straddle what was scanned and what is new.
	from := max(c.scanned-3, 0)
	end := bytes.Index(b[from:], []byte("\r\n\r\n"))
	if end < 0 {
		c.scanned = len(b)
		return classification{proto: httpProto}
	}
	end += from
	name, err := headHost(b[:end+4])
	return classification{proto: httpProto, done: true, name: name, err: err}
}

// headHost returns the host of a whole HTTP/1.x request head.
func headHost(head []byte) (string, error) {
	hosts, err := headHosts(head)
	if err != nil {
		return "", err
	}
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		return "", errors.New("malformed request")
	}
	if !validHost(req.Host) {
		// net/http would forward it without a Host, or refuse it.
		return "", errors.New("malformed Host")
	}
	return requestHost(hosts, req)
}

// validHost reports whether a Host value has only the bytes of a URI's
// host and port (RFC 3986, 3.2.2), as net/http checks before it sends or
// serves one.
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!$%&'()*+,-.:;=[]_~", c) >= 0) {
			return false
		}
	}
	return true
}

// hostOnly strips the port and brackets from a Host value and normalizes
// it.
func hostOnly(h string) string {
	// Only a port of digits is a port: anything else stays in, so that
	// the name is refused rather than read apart from what net/http
	// forwards (it drops a Host with such bytes).
	if host, port, err := net.SplitHostPort(h); err == nil && strings.Trim(port, "0123456789") == "" {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	// An IPv6 zone names one of the sender's interfaces: the request as
	// the relay forwards it (Request.Write) has none, so neither has the
	// host the policy decides on. The zone starts at the first '%' (a
	// zone may hold more: Request.Write cuts at the last one, and what it
	// leaves is cut here again on the way out).
	if a, err := netip.ParseAddr(h); err == nil && a.Zone() != "" {
		h = h[:strings.IndexByte(h, '%')]
	}
	return normalize(h)
}
