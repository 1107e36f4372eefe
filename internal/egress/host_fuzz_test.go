package egress

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// FuzzHTTPHost feeds arbitrary bytes to the sniffer as the first bytes of
// a connection. When it takes them for a whole HTTP request head and names
// a host, that host must be what a real net/http server sees, both for
// the bytes the sandbox sent and for the request as the relay forwards it
// (Request.Write), unless that server refuses the request; and it must be
// in the policy matcher's form: lower case, no trailing dot, no port, no
// brackets, an IP literal or a name.
func FuzzHTTPHost(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: A.Test.:8080\r\n\r\n",
		"GET http://b.test/x HTTP/1.1\r\nHost: b.test\r\n\r\n",
		"GET http://b.test/x HTTP/1.1\r\nHost: c.test\r\n\r\n",
		"POST http://B.TEST:80/ HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
		"GET / HTTP/1.1\r\nX: y\nHost: b.test\r\nHost: a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\n b.test\r\n\r\n",
		"GET / HTTP/1.1\r\nhOsT : a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test:80:90\r\n\r\n",
		"GET //b.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := classify(b)
		if !c.done || c.proto != httpProto || c.err != nil {
			return // refused, or not HTTP: nothing to agree on
		}
		name := c.name
		// What decide refuses ("numeric host name", "bad name") need not
		// agree with anything.
		if isIPLiteral(name) {
			if _, err := netip.ParseAddr(name); err != nil {
				return
			}
		} else if name != "" && checkHostname(name) != nil {
			return
		}
		if name != normalize(name) || strings.ContainsAny(name, "[]") {
			t.Fatalf("%q: host %q is not in the policy's form", b, name)
		}
		if strings.Contains(name, ":") {
			if _, err := netip.ParseAddr(name); err != nil {
				t.Fatalf("%q: host %q has a port or is no address", b, name)
			}
		}
		head := b[:bytes.Index(b, []byte("\r\n\r\n"))+4]
		if got, ok := serverHost(t, head); ok && hostOnly(got) != name {
			t.Fatalf("%q: the proxy decides on %q, a net/http server sees Host %q", head, name, got)
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("%q: classified, but ReadRequest fails: %v", head, err)
		}
		var fwd bytes.Buffer
		if err := req.Write(&fwd); err != nil {
			return // the relay forwards nothing
		}
		if got, ok := serverHost(t, fwd.Bytes()); ok && hostOnly(got) != name {
			t.Fatalf("%q forwarded as %q: the proxy decides on %q, a net/http server sees Host %q", head, fwd.Bytes(), name, got)
		}
	})
}

var (
	hostServerOnce sync.Once
	hostServerConn chan net.Conn
)

// serverHost hands head to a real net/http server and returns the Host it
// saw; ok is false when it refused the request.
func serverHost(t *testing.T, head []byte) (host string, ok bool) {
	hostServerOnce.Do(func() {
		hostServerConn = make(chan net.Conn)
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "close")
				io.WriteString(w, r.Host)
			}),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
		}
		go srv.Serve(chanListener(hostServerConn))
	})
	cli, srv := net.Pipe()
	defer cli.Close()
	hostServerConn <- srv
	cli.SetDeadline(time.Now().Add(20 * time.Second))
	go cli.Write(head) // ends when the server stops reading and cli closes
	resp, err := http.ReadResponse(bufio.NewReader(cli), nil)
	if err != nil {
		if ne, isNet := err.(net.Error); isNet && ne.Timeout() {
			t.Fatalf("%q: the server did not answer: %v", head, err)
		}
		return "", false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", false
	}
	return string(body), true
}

// chanListener is a listener whose connections come from a channel.
type chanListener chan net.Conn

func (l chanListener) Accept() (net.Conn, error) { return <-l, nil }
func (l chanListener) Close() error              { return nil }
func (l chanListener) Addr() net.Addr            { return &net.TCPAddr{} }
