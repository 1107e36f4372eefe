package egress

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestParseClientHello(t *testing.T) {
	real := realClientHello(t, "API.Example.org")
	if name, complete, err := parseClientHello(real); name != "api.example.org" || !complete || err != nil {
		t.Errorf("crypto/tls hello: got %q %v %v", name, complete, err)
	}
	// The same hello split over two records, and cut short.
	hs := real[5:]
	split := append([]byte{0x16, 3, 1, 0, 10}, hs[:10]...)
	split = append(split, 0x16, 3, 1, byte((len(hs)-10)>>8), byte(len(hs)-10))
	split = append(split, hs[10:]...)
	if name, complete, err := parseClientHello(split); name != "api.example.org" || !complete || err != nil {
		t.Errorf("two records: got %q %v %v", name, complete, err)
	}
	for _, n := range []int{1, 5, 9, 20, len(split) - 1} {
		if _, complete, err := parseClientHello(split[:n]); complete || err != nil {
			t.Errorf("first %d bytes: complete %v, err %v; want more to be needed", n, complete, err)
		}
	}
	noSNI := realClientHello(t, "")
	if name, complete, err := parseClientHello(noSNI); name != "" || !complete || err != nil {
		t.Errorf("no server name: got %q %v %v", name, complete, err)
	}
	for _, bad := range [][]byte{
		{0x16, 3, 1, 0, 4, 2, 0, 0, 0},                                // not a ClientHello
		{0x16, 3, 1, 0, 6, 1, 0, 0, 2, 3, 3},                          // truncated body
		append(clientHello("a\x00b"), 0)[:len(clientHello("a\x00b"))], // control byte in the name
		clientHello("a..test"),                                        // not a host name: the policy could not match it
		clientHello("a.test:443"),                                     // a port
		clientHello("-a.test"),                                        // a label starting with a hyphen
		clientHello("[::1]"),                                          // an IPv6 literal, which RFC 6066 forbids
	} {
		if _, complete, err := parseClientHello(bad); err == nil {
			t.Errorf("%x: complete %v, want an error", bad, complete)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		in    string
		proto protocol
		done  bool
		name  string
		err   bool
	}{
		{in: "", proto: opaque},
		{in: "GE", proto: opaque},
		{in: "GET / HT", proto: opaque},
		{in: "GET / HTTP/1.1\r\nHost: a.test\r\n", proto: httpProto},
		{in: "GET / HTTP/1.1\r\nHost: A.test:8080\r\n\r\n", proto: httpProto, done: true, name: "a.test"},
		{in: "POST http://b.test/x HTTP/1.0\r\n\r\n", proto: httpProto, done: true, name: "b.test"},
		{in: "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", proto: httpProto, done: true, name: "::1"},
		{in: "GET / HTTP/1.1\r\n\r\n", proto: httpProto, done: true, name: ""},
		{in: "GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]:80\r\n\r\n", proto: httpProto, done: true, name: "fe80::1"},
		{in: "GET / HTTP/1.1\r\nHost: a.test:80:90\r\n\r\n", proto: httpProto, done: true, name: "a.test:80:90"},
		{in: "GET / HTTP/1.1\r\nHost:A: 0\r\n\r\n", proto: httpProto, done: true, err: true},
		{in: "GET / HTTP/1.1\r\nHost: [::1%\"]\r\n\r\n", proto: httpProto, done: true, err: true},
		{in: "GET / HTTP/1.1\r\nHost: a.test/x\r\n\r\n", proto: httpProto, done: true, err: true},
		{in: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", proto: httpProto, done: true, err: true},
		// A zone ends at its first '%'; brackets enclose the whole host; a
		// target is a path, "*" or an http(s) URL (found by FuzzHTTPHost).
		{in: "GET / HTTP/1.1\r\nHost: [fe10::1%25eth0e10::1%2]\r\n\r\n", proto: httpProto, done: true, name: "fe10::1"},
		{in: "A * HTTP/1.0\r\nHost:[::%10a]]]]]aaa\r\n\r\n", proto: httpProto, done: true, err: true},
		{in: "GET / HTTP/1.1\r\nHost: x[::1]\r\n\r\n", proto: httpProto, done: true, err: true},
		{in: "A a:a://other.test HTTP/1.0\r\nHost:\r\n\r\n", proto: httpProto, done: true, err: true},
		{in: "GET ftp://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", proto: httpProto, done: true, err: true},
		{in: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", proto: opaque, done: true},
		{in: "SSH-2.0-OpenSSH\r\n", proto: opaque, done: true},
		{in: "PING\r\n", proto: opaque, done: true},
		{in: "get / HTTP/1.1\r\n\r\n", proto: opaque, done: true},
		{in: "\x16\x03\x01\x00", proto: tlsProto},
		{in: "\x16\x01", proto: opaque, done: true},
	} {
		got := classify([]byte(tc.in))
		if got.proto != tc.proto || got.done != tc.done || got.name != tc.name || (got.err != nil) != tc.err {
			t.Errorf("classify(%q) = %+v, want proto %v done %v name %q err %v", tc.in, got, tc.proto, tc.done, tc.name, tc.err)
		}
	}
}

func TestSniff(t *testing.T) {
	run := func(write func(net.Conn)) sniffed {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go write(a)
		return sniff(b, 100*time.Millisecond, time.Second)
	}
	t.Run("silent client is opaque", func(t *testing.T) {
		start := time.Now()
		s := run(func(net.Conn) {})
		if s.proto != opaque || s.err != nil || s.gone || len(s.peeked) != 0 {
			t.Errorf("got %+v", s)
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Errorf("decided after %v, before the peek timeout", d)
		}
	})
	t.Run("hello in pieces", func(t *testing.T) {
		hello := realClientHello(t, "a.test")
		s := run(func(c net.Conn) {
			for i := 0; i < len(hello); i += 100 {
				c.Write(hello[i:min(i+100, len(hello))])
				time.Sleep(5 * time.Millisecond)
			}
		})
		if s.proto != tlsProto || s.name != "a.test" || s.err != nil || string(s.peeked) != string(hello) {
			t.Errorf("got proto %v name %q err %v, %d bytes peeked of %d", s.proto, s.name, s.err, len(s.peeked), len(hello))
		}
	})
	t.Run("request head in pieces", func(t *testing.T) {
		s := run(func(c net.Conn) {
			for _, part := range []string{"GE", "T /x HTTP/1.1\r\nHo", "st: b.test\r\n", "\r\nbody"} {
				c.Write([]byte(part))
				time.Sleep(5 * time.Millisecond)
			}
		})
		if s.proto != httpProto || s.name != "b.test" || s.err != nil || !strings.HasPrefix(string(s.peeked), "GET /x") {
			t.Errorf("got %+v", s)
		}
	})
	t.Run("unfinished head is refused", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		go a.Write([]byte("GET / HTTP/1.1\r\nHost: b.test\r\n"))
		s := sniff(b, 100*time.Millisecond, 200*time.Millisecond)
		if s.proto != httpProto || s.err == nil {
			t.Errorf("got %+v, want an error", s)
		}
	})
	t.Run("closed at once", func(t *testing.T) {
		s := run(func(c net.Conn) { c.Close() })
		if !s.gone {
			t.Errorf("got %+v, want gone", s)
		}
	})
}
