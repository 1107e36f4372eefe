package egress

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// closeUpstream is an HTTPS upstream that answers every request with a
// body that ends when it closes the connection: status line proto, then
// headers with neither Content-Length nor chunked encoding, then the
// request's Authorization echoed, and a close (cut: in the middle of a
// TLS record, as a broken upstream would).
func closeUpstream(t *testing.T, ca *CA, proto string, cut bool) string {
	t.Helper()
	l := listen(t)
	tl := tls.NewListener(l, &tls.Config{
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) { return ca.Leaf(hello.ServerName) },
		NextProtos:     []string{"http/1.1"},
	})
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				auth := req.Header.Get("Authorization")
				io.WriteString(c, proto+" 200 OK\r\nContent-Type: text/plain\r\n\r\n")
				io.WriteString(c, "start; you sent: "+auth+"; ")
				io.WriteString(c, strings.Repeat("x", 100<<10)+"; end")
				if cut {
					// A record's header promising more than comes.
					tc := c.(*tls.Conn)
					tc.NetConn().Write([]byte{23, 3, 3, 0x40, 0})
					tc.NetConn().Close()
				}
			}()
		}
	}()
	return l.Addr().String()
}

// eofConn reports whether its reader ever saw the connection's end: a
// TLS client that got a close_notify stops before it.
type eofConn struct {
	net.Conn
	eof atomic.Bool
}

func (c *eofConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) {
		c.eof.Store(true)
	}
	return n, err
}

// rawExchange sends one request line proto for path through the proxy
// and reads the whole answer, to the connection's end.
func (m *mitmEnv) rawExchange(t *testing.T, path, proto string) (head http.Header, status string, body string, closeNotify bool, err error) {
	t.Helper()
	raw, err := net.Dial("tcp4", m.addr)
	if err != nil {
		t.Fatal(err)
	}
	ec := &eofConn{Conn: raw}
	c := tls.Client(ec, &tls.Config{ServerName: "api.test", RootCAs: pool(t, m.ca.CertPEM())})
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" "+proto+"\r\nHost: api.test\r\nAuthorization: Bearer "+placeholder+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	req := &http.Request{Method: "GET", Proto: proto, ProtoMajor: 1, ProtoMinor: 1}
	if proto == "HTTP/1.0" {
		req.ProtoMinor = 0
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, "", "", false, err
	}
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		// Whatever the framing, the connection must end cleanly.
		_, err = io.ReadAll(br)
	}
	resp.Header.Set("X-Transfer-Encoding", strings.Join(resp.TransferEncoding, ","))
	return resp.Header, resp.Proto, string(b), !ec.eof.Load(), err
}

// TestMITMCloseDelimited: a response whose body ends with the upstream's
// close reaches the sandbox whole and scrubbed: chunked to an HTTP/1.1
// client, ended by a TLS close_notify to an HTTP/1.0 one (which cannot be
// sent chunks); and a body cut short never looks complete.
func TestMITMCloseDelimited(t *testing.T) {
	want := "start; you sent: Bearer " + placeholder + "; " + strings.Repeat("x", 100<<10) + "; end"
	for _, tc := range []struct {
		name, upstream, client string
		chunked                bool
	}{
		{"HTTP/1.0 upstream, HTTP/1.1 client", "HTTP/1.0", "HTTP/1.1", true},
		{"HTTP/1.1 upstream, HTTP/1.1 client", "HTTP/1.1", "HTTP/1.1", true},
		{"HTTP/1.0 upstream, HTTP/1.0 client", "HTTP/1.0", "HTTP/1.0", false},
		{"HTTP/1.1 upstream, HTTP/1.0 client", "HTTP/1.1", "HTTP/1.0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMITMEnv(t)
			m.to(elsewhere(closeUpstream(t, m.upCA, tc.upstream, false)))
			h, proto, body, notify, err := m.rawExchange(t, "/close", tc.client)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			if body != want {
				t.Errorf("got a body of %d bytes %.60q..., want %d bytes %.60q...", len(body), body, len(want), want)
			}
			if strings.Contains(body, realValue) {
				t.Error("the real value reached the sandbox")
			}
			if got := h.Get("X-Transfer-Encoding") == "chunked"; got != tc.chunked {
				t.Errorf("got chunked %v (%s), want %v", got, proto, tc.chunked)
			}
			if tc.chunked && proto != "HTTP/1.1" {
				t.Errorf("got a chunked body under %s, want HTTP/1.1", proto)
			}
			if !notify {
				t.Error("the connection ended without a TLS close_notify")
			}
		})
	}
	for _, client := range []string{"HTTP/1.1", "HTTP/1.0"} {
		t.Run("cut short, "+client+" client", func(t *testing.T) {
			m := newMITMEnv(t)
			m.to(elsewhere(closeUpstream(t, m.upCA, "HTTP/1.0", true)))
			_, _, body, notify, err := m.rawExchange(t, "/close", client)
			if err == nil && notify {
				t.Errorf("got %d bytes ending cleanly, want the cut to show", len(body))
			}
		})
	}
}
