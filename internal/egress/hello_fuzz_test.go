package egress

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// FuzzClientHello feeds arbitrary bytes to the ClientHello reader. Beyond
// not panicking: a name it returns is normalized and a host name the
// policy can match; fed in pieces (as a connection delivers them) it
// reaches the same verdict as at once; and before that verdict every
// prefix is "need more", never a name or an error.
func FuzzClientHello(f *testing.F) {
	f.Add(clientHello("api.example.org"), uint8(0))
	f.Add(clientHello("A.Test."), uint8(3))
	f.Add(clientHello("a\x00b"), uint8(1))
	f.Add(clientHello("127.0.0.1"), uint8(7))
	f.Add(clientHello(""), uint8(0))
	f.Add(fragment(clientHello("two.records.test")[5:], 7), uint8(2))
	f.Add([]byte("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00"), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		name, complete, err := parseClientHello(b)
		if err == nil && complete && name != "" {
			if name != normalize(name) {
				t.Errorf("name %q is not normalized", name)
			}
			if cerr := checkHostname(name); cerr != nil {
				t.Errorf("name %q: %v", name, cerr)
			}
		}
		if !complete && name != "" {
			t.Errorf("incomplete hello gave the name %q", name)
		}
		var h helloReader
		prev := 0 // a prefix known to need more
		for n := 0; ; n += int(step) + 1 {
			n = min(n, len(b))
			pname, pcomplete, perr := h.feed(b[:n])
			if !pcomplete && perr == nil {
				if pname != "" {
					t.Fatalf("at %d bytes: name %q while more is needed", n, pname)
				}
				if n == len(b) {
					if complete || err != nil {
						t.Fatalf("fed in steps: still waiting at the end; at once %q %v %v", name, complete, err)
					}
					return
				}
				prev = n
				continue
			}
			if pname != name || pcomplete != complete || (perr == nil) != (err == nil) {
				t.Fatalf("fed in steps of %d: at %d bytes got %q %v %v; at once %q %v %v", step+1, n, pname, pcomplete, perr, name, complete, err)
			}
			// From scratch, every prefix up to the verdict needs more and
			// the verdict is the same.
			for m := prev; m <= n; m++ {
				mname, mcomplete, merr := parseClientHello(b[:m])
				if mcomplete || merr != nil {
					if mname != name || mcomplete != complete || (merr == nil) != (err == nil) {
						t.Fatalf("first %d bytes: got %q %v %v; all %q %v %v", m, mname, mcomplete, merr, name, complete, err)
					}
					return
				}
				if mname != "" {
					t.Fatalf("first %d bytes: name %q while more is needed", m, mname)
				}
			}
			t.Fatalf("from scratch no verdict by %d bytes", n)
		}
	})
}

// FuzzClientHelloRoundTrip makes crypto/tls write a ClientHello for a
// host name made of the fuzzer's bytes, cuts its handshake into records
// of a fuzzed size, and checks that the reader finds exactly that name,
// and needs more on every cut of the bytes.
func FuzzClientHelloRoundTrip(f *testing.F) {
	f.Add("api.example.org", uint16(0))
	f.Add("API.Example.ORG.", uint16(1))
	f.Add("x-1.y_2.Z3", uint16(40))
	f.Add(strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)+"."+strings.Repeat("c", 63)+"."+strings.Repeat("d", 61), uint16(300))
	f.Add("10.0.0.1", uint16(0))
	f.Fuzz(func(t *testing.T, raw string, size uint16) {
		sni := hostName(raw)
		want := normalize(sni)
		if checkHostname(want) != nil {
			return // not a name crypto/tls should be asked for
		}
		if net.ParseIP(sni) != nil {
			want = "" // crypto/tls sends no server name for an address
		}
		hello := tlsHello(t, sni)
		if size > 0 {
			hello = fragment(hello[5:], int(size))
		}
		name, complete, err := parseClientHello(hello)
		if name != want || !complete || err != nil {
			t.Fatalf("ServerName %q: got %q %v %v, want %q", sni, name, complete, err, want)
		}
		for _, n := range []int{0, 4, 5, len(hello) / 2, len(hello) - 1} {
			if name, complete, err := parseClientHello(hello[:n]); name != "" || complete || err != nil {
				t.Fatalf("ServerName %q, first %d of %d bytes: got %q %v %v, want more needed", sni, n, len(hello), name, complete, err)
			}
		}
	})
}

// hostName maps arbitrary bytes onto the characters of host names, keeping
// letters' case and dots, so that the fuzzer explores mostly valid names.
func hostName(raw string) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
	var b strings.Builder
	for i := 0; i < len(raw) && i < 260; i++ {
		c := raw[i]
		switch {
		case c == '.' || strings.IndexByte(chars, c) >= 0:
			b.WriteByte(c)
		default:
			b.WriteByte(chars[int(c)%len(chars)])
		}
	}
	return b.String()
}

// tlsHello is the first flight crypto/tls writes for sni: its ClientHello
// record.
func tlsHello(t *testing.T, sni string) []byte {
	t.Helper()
	c := &captureConn{}
	cfg := &tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}
	if err := tls.Client(c, cfg).Handshake(); err == nil {
		t.Fatal("handshake with nobody succeeded")
	}
	if c.out.Len() == 0 {
		t.Fatalf("ServerName %q: crypto/tls wrote nothing", sni)
	}
	return c.out.Bytes()
}

// fragment cuts a handshake message into TLS records of at most size
// bytes.
func fragment(hs []byte, size int) []byte {
	size = min(max(size, 1), maxRecord)
	var out []byte
	for len(hs) > 0 {
		n := min(size, len(hs))
		out = append(out, 0x16, 3, 1, byte(n>>8), byte(n))
		out = append(out, hs[:n]...)
		hs = hs[n:]
	}
	return out
}

// captureConn is a connection that keeps what is written to it and has
// nothing to read: a TLS client's handshake writes its ClientHello, then
// fails.
type captureConn struct{ out bytes.Buffer }

func (c *captureConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *captureConn) Write(b []byte) (int, error)      { return c.out.Write(b) }
func (c *captureConn) Close() error                     { return nil }
func (c *captureConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *captureConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }
