package egress

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
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
		s := classify(buf)
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

func classify(b []byte) classification {
	if len(b) == 0 {
		return classification{}
	}
	if b[0] == 0x16 {
		if len(b) >= 2 && b[1] != 0x03 {
			return classification{proto: opaque, done: true}
		}
		name, complete, err := parseClientHello(b)
		return classification{proto: tlsProto, done: complete || err != nil, name: name, err: err}
	}
	return classifyHTTP(b)
}

// classifyHTTP recognises an HTTP/1.x request: a method token, a target
// and HTTP/1.0 or HTTP/1.1 on the first line.
func classifyHTTP(b []byte) classification {
	i := 0
	for ; i < len(b) && i <= 20 && 'A' <= b[i] && b[i] <= 'Z'; i++ {
	}
	switch {
	case i == len(b) && i <= 20:
		return classification{} // a method, perhaps: wait
	case i == 0 || i > 20 || b[i] != ' ':
		return classification{proto: opaque, done: true}
	}
	eol := bytes.IndexByte(b, '\n')
	if eol < 0 {
		return classification{} // still the request line: cannot tell
	}
	parts := strings.Fields(string(b[:eol]))
	if len(parts) != 3 || (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") {
		return classification{proto: opaque, done: true}
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return classification{proto: httpProto}
	}
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
	return requestHost(hosts, req)
}

// hostOnly strips the port and brackets from a Host value and normalizes
// it.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return normalize(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}

// parseClientHello reads the server name from TLS records holding a
// ClientHello (possibly split over several records). complete is false
// while more bytes are needed; name is "" when the hello has none.
func parseClientHello(b []byte) (name string, complete bool, err error) {
	var hs []byte
	for len(b) > 0 {
		if len(b) < 5 {
			return "", false, nil
		}
		if b[0] != 0x16 {
			return "", false, errors.New("not a handshake record")
		}
		n := int(b[3])<<8 | int(b[4])
		if n == 0 || n > 1<<14 {
			return "", false, errors.New("bad record length")
		}
		if len(b) < 5+n {
			return "", false, nil
		}
		hs = append(hs, b[5:5+n]...)
		b = b[5+n:]
		if len(hs) >= 4 {
			if hs[0] != 1 {
				return "", false, errors.New("not a ClientHello")
			}
			msgLen := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
			if msgLen > maxHead {
				return "", false, errors.New("ClientHello too large")
			}
			if len(hs) >= 4+msgLen {
				name, err := serverName(hs[4 : 4+msgLen])
				return name, true, err
			}
		}
	}
	return "", false, nil
}

// serverName parses a ClientHello body and returns its host_name.
func serverName(body []byte) (string, error) {
	r := reader(body)
	if !r.skip(2+32) || !r.skipVec(1) || !r.skipVec(2) || !r.skipVec(1) {
		return "", errors.New("malformed ClientHello")
	}
	if len(r) == 0 {
		return "", nil // no extensions
	}
	exts, ok := r.vec(2)
	if !ok {
		return "", errors.New("malformed extensions")
	}
	name := ""
	seen := false
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		data, ok2 := exts.vec(2)
		if !ok1 || !ok2 {
			return "", errors.New("malformed extensions")
		}
		if typ != 0 { // server_name
			continue
		}
		if seen {
			return "", errors.New("two server_name extensions")
		}
		seen = true
		list, ok := data.vec(2)
		if !ok {
			return "", errors.New("malformed server_name")
		}
		for len(list) > 0 {
			nameType, ok1 := list.u8()
			host, ok2 := list.vec(2)
			if !ok1 || !ok2 {
				return "", errors.New("malformed server_name")
			}
			if nameType != 0 {
				continue
			}
			if name != "" {
				return "", errors.New("two host names")
			}
			if len(host) == 0 {
				return "", errors.New("empty server name")
			}
			for _, c := range host {
				if c <= ' ' || c >= 0x7f {
					return "", errors.New("server name is not a host name")
				}
			}
			name = normalize(string(host))
		}
	}
	return name, nil
}

// reader is a cursor over TLS's length-prefixed encoding.
type reader []byte

func (r *reader) skip(n int) bool {
	if len(*r) < n {
		return false
	}
	*r = (*r)[n:]
	return true
}

func (r *reader) u8() (int, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	v := int((*r)[0])
	*r = (*r)[1:]
	return v, true
}

func (r *reader) u16() (int, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := int((*r)[0])<<8 | int((*r)[1])
	*r = (*r)[2:]
	return v, true
}

// vec reads a vector with an lenBytes-byte length prefix.
func (r *reader) vec(lenBytes int) (reader, bool) {
	var n int
	var ok bool
	if lenBytes == 1 {
		n, ok = r.u8()
	} else {
		n, ok = r.u16()
	}
	if !ok || len(*r) < n {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) skipVec(lenBytes int) bool {
	_, ok := r.vec(lenBytes)
	return ok
}
