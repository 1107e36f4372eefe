package egress

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawExchange sends data through the proxy and returns what comes back
// before the proxy or the upstream closes.
func (e *env) rawExchange(data string) string {
	e.t.Helper()
	c, err := net.Dial("tcp4", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if data != "" {
		if _, err := io.WriteString(c, data); err != nil {
			e.t.Fatal(err)
		}
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

func TestHTTP(t *testing.T) {
	e := newEnv(t, Policy{Internet: true, Allow: []string{"plain.test", "*.wild.test"}})
	up := httpUpstream(t, hostEcho)
	e.to(elsewhere(up)) // the sandbox's own idea of the address is ignored
	p := port(up)
	for _, tc := range []struct {
		name, url, host string
		wantBody        string // "" when refused
		wantName        string
		wantReason      string
	}{
		{name: "exact name", url: "http://plain.test:" + p + "/x?y=1", wantBody: "host=plain.test:" + p + " path=/x?y=1", wantName: "plain.test"},
		{name: "wildcard", url: "http://a.wild.test:" + p + "/", wantBody: "host=a.wild.test:" + p + " path=/", wantName: "a.wild.test"},
		{name: "wildcard, deeper", url: "http://b.c.wild.test:" + p + "/", wantBody: "host=b.c.wild.test:" + p + " path=/", wantName: "b.c.wild.test"},
		{name: "wildcard does not cover its apex", url: "http://wild.test:" + p + "/", wantName: "wild.test", wantReason: "name not allowed"},
		{name: "denied name", url: "http://evil.test:" + p + "/", wantName: "evil.test", wantReason: "name not allowed"},
		{name: "upper case and trailing dot", url: "http://PLAIN.test.:" + p + "/", wantBody: "host=PLAIN.test.:" + p + " path=/", wantName: "plain.test"},
		{name: "IP literal", url: "http://127.0.0.1:" + p + "/", wantName: "127.0.0.1", wantReason: "IP literal"},
		{name: "decimal IP literal", url: "http://plain.test:" + p + "/", host: "2130706433", wantName: "2130706433", wantReason: "IP literal"},
		{name: "IPv6 literal", url: "http://plain.test:" + p + "/", host: "[::ffff:127.0.0.1]:" + p, wantName: "::ffff:127.0.0.1", wantReason: "IP literal"},
		{name: "metadata literal", url: "http://169.254.169.254:" + p + "/", wantName: "169.254.169.254", wantReason: "IP literal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _, err := get(e.client(nil), tc.url, func(r *http.Request) {
				if tc.host != "" {
					r.Host = tc.host
				}
			})
			if tc.wantBody == "" {
				if err != nil || code != http.StatusBadGateway || !strings.Contains(body, tc.wantReason) {
					t.Errorf("got %d %q %v, want 502 saying %q", code, body, err, tc.wantReason)
				}
				e.wantEvent("http", tc.wantName, Refused, tc.wantReason)
				return
			}
			if err != nil || code != 200 || body != tc.wantBody {
				t.Errorf("got %d %q %v, want 200 %q", code, body, err, tc.wantBody)
			}
			e.wantEvent("http", tc.wantName, Allowed, "")
			if ev := e.lastEvent(); ev.Address != "127.0.0.1" || ev.Port != int(netip.MustParseAddrPort(up).Port()) {
				t.Errorf("event %+v: want address 127.0.0.1 and the original port", ev)
			}
		})
	}
	t.Run("kept-alive connection, another Host", func(t *testing.T) {
		c := e.client(nil)
		if code, _, _, err := get(c, "http://plain.test:"+p+"/"); err != nil || code != 200 {
			t.Fatalf("got %d %v, want 200", code, err)
		}
		var reused bool
		code, body, _, err := get(c, "http://plain.test:"+p+"/", func(r *http.Request) {
			r.Host = "a.wild.test"
			*r = *r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
		})
		if !reused {
			t.Fatal("the client did not reuse its connection")
		}
		if err != nil || code != http.StatusBadGateway {
			t.Errorf("got %d %q %v, want 502", code, body, err)
		}
		e.wantEvent("http", "a.wild.test", Refused, "Host differs from the connection's first request")
	})
	t.Run("absolute-form target differs from Host", func(t *testing.T) {
		got := e.rawExchange("GET http://plain.test:" + p + "/ HTTP/1.1\r\nHost: evil.test\r\n\r\n")
		if !strings.HasPrefix(got, "HTTP/1.1 502 ") {
			t.Errorf("got %q, want 502", got)
		}
		e.wantEvent("http", "", Refused, "differs from Host")
	})
	t.Run("absolute-form target", func(t *testing.T) {
		got := e.rawExchange("GET http://plain.test:" + p + "/abs HTTP/1.1\r\nConnection: close\r\n\r\n")
		if !strings.Contains(got, "host=plain.test:"+p+" path=/abs") {
			t.Errorf("got %q", got)
		}
	})
	t.Run("no Host", func(t *testing.T) {
		if got := e.rawExchange("GET / HTTP/1.0\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 502 ") {
			t.Errorf("got %q, want 502", got)
		}
		e.wantEvent("http", "", Refused, "no Host")
	})
	t.Run("two Host headers", func(t *testing.T) {
		if got := e.rawExchange("GET / HTTP/1.1\r\nHost: plain.test\r\nHost: evil.test\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 502 ") {
			t.Errorf("got %q, want 502", got)
		}
		e.wantEvent("http", "", Refused, "several Host headers")
	})
}

// TestSandboxChosenAddress: the sandbox resolved an allowed name to an
// address of its own choosing and connects there; the proxy resolves the
// name itself, so the chosen server receives nothing.
func TestSandboxChosenAddress(t *testing.T) {
	e := newEnv(t, Policy{Internet: true, Allow: []string{"plain.test"}})
	l, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	defer l.Close()
	var hits atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	e.to(netip.MustParseAddrPort(l.Addr().String()))
	code, _, _, err := get(e.client(nil), "http://plain.test:"+port(l.Addr().String())+"/")
	if err != nil || code != http.StatusBadGateway {
		t.Errorf("got %d %v, want 502: nothing listens on the name's own address", code, err)
	}
	e.wantEvent("http", "plain.test", Refused, "upstream unreachable")
	if n := hits.Load(); n != 0 {
		t.Errorf("the sandbox's chosen server got %d connections, want 0", n)
	}
}

func TestTLS(t *testing.T) {
	upCA, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Policy{Internet: true, Allow: []string{"plain.test", "*.wild.test"}})
	up := tlsUpstream(t, upCA, hostEcho)
	e.to(elsewhere(up))
	p := port(up)
	c := e.client(pool(t, upCA.CertPEM()))
	for _, tc := range []struct {
		name, url  string
		ok         bool
		wantName   string
		wantReason string
	}{
		{name: "exact name", url: "https://plain.test:" + p + "/", ok: true, wantName: "plain.test"},
		{name: "wildcard", url: "https://a.wild.test:" + p + "/", ok: true, wantName: "a.wild.test"},
		{name: "denied name", url: "https://evil.test:" + p + "/", wantName: "evil.test", wantReason: "name not allowed"},
		{name: "wildcard apex", url: "https://wild.test:" + p + "/", wantName: "wild.test", wantReason: "name not allowed"},
		{name: "IP literal, so no server name", url: "https://127.0.0.1:" + p + "/", wantReason: "no server name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _, err := get(c, tc.url)
			if !tc.ok {
				if err == nil {
					t.Errorf("got %d %q, want the connection refused", code, body)
				}
				e.wantEvent("tls", tc.wantName, Refused, tc.wantReason)
				return
			}
			if err != nil || code != 200 {
				t.Errorf("got %d %q %v, want 200", code, body, err)
			}
			e.wantEvent("tls", tc.wantName, Allowed, "")
		})
	}
	for _, sni := range []string{"127.0.0.1", "2130706433", "0x7f000001"} {
		t.Run("server name "+sni, func(t *testing.T) {
			if got := e.rawExchange(string(clientHello(sni))); got != "" {
				t.Errorf("got %q, want nothing", got)
			}
			e.wantEvent("tls", sni, Refused, "IP literal")
		})
	}
	t.Run("malformed ClientHello", func(t *testing.T) {
		if got := e.rawExchange("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00"); got != "" {
			t.Errorf("got %q, want nothing", got)
		}
		e.wantEvent("tls", "", Refused, "ClientHello")
	})
}

// TestOpenInternet: internet on and no allow list: IP literals and opaque
// TCP go through, unless blocked.
func TestOpenInternet(t *testing.T) {
	e := newEnv(t, Policy{Internet: true})
	up := httpUpstream(t, hostEcho)
	p := port(up)
	c := e.client(nil)
	e.toAddr(up)
	code, body, _, err := get(c, "http://127.0.0.1:"+p+"/lit")
	if err != nil || code != 200 || !strings.Contains(body, "path=/lit") {
		t.Errorf("IP literal: got %d %q %v, want 200", code, body, err)
	}
	e.wantEvent("http", "127.0.0.1", Allowed, "")
	for _, lit := range []string{"169.254.169.254", "10.0.0.1", "[::ffff:169.254.169.254]", "[fd00:ec2::254]", "[::ffff:a9fe:a9fe]"} {
		code, _, _, err := get(c, "http://plain.test:"+p+"/", func(r *http.Request) { r.Host = lit })
		if err != nil || code != http.StatusBadGateway {
			t.Errorf("Host %s: got %d %v, want 502", lit, code, err)
		}
		e.wantEvent("http", hostOnly(lit), Refused, "blocked address")
	}
	// Opaque TCP to any address not blocked; to a blocked one, never.
	banner := bannerUpstream(t)
	e.toAddr(banner)
	if got := e.rawExchange(""); got != "SSH-2.0-test\r\n" {
		t.Errorf("opaque: got %q, want the banner", got)
	}
	e.wantEvent("tcp", "", Allowed, "")
	e.to(netip.MustParseAddrPort("10.1.2.3:22"))
	if got := e.rawExchange(""); got != "" {
		t.Errorf("opaque to 10.1.2.3: got %q, want nothing", got)
	}
	e.wantEvent("tcp", "", Refused, "blocked address")
}

func TestInternetOff(t *testing.T) {
	e := newEnv(t, Policy{Internet: false, Allow: []string{"plain.test"}})
	up := httpUpstream(t, hostEcho)
	e.toAddr(up)
	if _, _, _, err := get(e.client(nil), "http://plain.test:"+port(up)+"/"); err == nil {
		t.Error("got a response, want the connection refused")
	}
	e.wantEvent("tcp", "", Refused, "internet off")
	if rcode, _ := e.query(t, "udp", "plain.test", qA); rcode != rcodeRefused {
		t.Errorf("DNS: got rcode %d, want REFUSED", rcode)
	}
}

// bannerUpstream is a server-first service (as ssh is): it sends a banner
// and closes.
func bannerUpstream(t *testing.T) string {
	l := listen(t)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "SSH-2.0-test\r\n")
			c.Close()
		}
	}()
	return l.Addr().String()
}

// lineEchoUpstream is a client-first service that is neither TLS nor
// HTTP: it answers a line with "+" and the line.
func lineEchoUpstream(t *testing.T) string {
	l := listen(t)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "+"+line)
			}()
		}
	}()
	return l.Addr().String()
}

func TestOpaqueTCP(t *testing.T) {
	e := newEnv(t, Policy{Internet: true, Allow: []string{"git.test"}})
	banner := bannerUpstream(t)
	e.toAddr(banner)
	if got := e.rawExchange(""); got != "" {
		t.Errorf("before any DNS answer: got %q, want nothing", got)
	}
	e.wantEvent("tcp", "", Refused, "address not resolved for an allowed name")

	// A denied name is not answered, so it hands nothing out.
	if rcode, _ := e.query(t, "udp", "evil.test", qA); rcode != rcodeRefused {
		t.Errorf("evil.test: got rcode %d, want REFUSED", rcode)
	}
	if got := e.rawExchange(""); got != "" {
		t.Errorf("after a refused query: got %q, want nothing", got)
	}

	rcode, addrs := e.query(t, "udp", "git.test", qA)
	if rcode != 0 || len(addrs) != 1 || addrs[0] != sandboxAddr {
		t.Fatalf("git.test: got rcode %d %v, want 127.0.0.1", rcode, addrs)
	}
	if got := e.rawExchange(""); got != "SSH-2.0-test\r\n" {
		t.Errorf("after the answer: got %q, want the banner", got)
	}
	e.wantEvent("tcp", "git.test", Allowed, "")

	// A client-first protocol that is neither TLS nor HTTP is opaque too.
	e.toAddr(lineEchoUpstream(t))
	if got := e.rawExchange("PING\r\n"); got != "+PING\r\n" {
		t.Errorf("client-first opaque: got %q, want +PING", got)
	}

	// The policy changes: the handout no longer opens anything.
	e.dir.setPolicy(Policy{Internet: true, Allow: []string{"plain.test"}})
	e.toAddr(banner)
	if got := e.rawExchange(""); got != "" {
		t.Errorf("after the policy change: got %q, want nothing", got)
	}
	e.wantEvent("tcp", "", Refused, "address not resolved for an allowed name")
}

func TestUnknownSource(t *testing.T) {
	e := newEnv(t, Policy{Internet: true})
	e.dir.mu.Lock()
	e.dir.ok = false
	e.dir.mu.Unlock()
	up := httpUpstream(t, hostEcho)
	e.toAddr(up)
	if got := e.rawExchange("GET / HTTP/1.1\r\nHost: plain.test\r\n\r\n"); got != "" {
		t.Errorf("got %q, want nothing", got)
	}
	if evs := e.p.Log().Events(sandboxID); len(evs) != 0 {
		t.Errorf("got events %v, want none", evs)
	}
}

// clientHello is a minimal TLS ClientHello record naming sni.
func clientHello(sni string) []byte {
	var sn []byte
	sn = binary.BigEndian.AppendUint16(sn, uint16(len(sni)+3))
	sn = append(sn, 0)
	sn = binary.BigEndian.AppendUint16(sn, uint16(len(sni)))
	sn = append(sn, sni...)
	var ext []byte
	ext = binary.BigEndian.AppendUint16(ext, 0)
	ext = binary.BigEndian.AppendUint16(ext, uint16(len(sn)))
	ext = append(ext, sn...)
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...)
	body = append(body, 0, 0, 2, 0x13, 0x01, 1, 0)
	body = binary.BigEndian.AppendUint16(body, uint16(len(ext)))
	body = append(body, ext...)
	hs := []byte{1, 0, byte(len(body) >> 8), byte(len(body))}
	hs = append(hs, body...)
	rec := []byte{0x16, 3, 1, byte(len(hs) >> 8), byte(len(hs))}
	return append(rec, hs...)
}

// realClientHello is what crypto/tls sends for sni.
func realClientHello(t *testing.T, sni string) []byte {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: sni == "", NextProtos: []string{"h2", "http/1.1"}}).Handshake()
		a.Close()
	}()
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := b.Read(buf)
		out = append(out, buf[:n]...)
		if _, complete, perr := parseClientHello(out); complete || perr != nil || err != nil {
			b.Close()
			return out
		}
	}
}

// TestHTTPFraming: responses of every framing pass the relay intact, and
// the connection stays usable after each.
func TestHTTPFraming(t *testing.T) {
	e := newEnv(t, Policy{Internet: true, Allow: []string{"plain.test"}})
	up := httpUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/empty":
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/chunked":
			for i := range 3 {
				io.WriteString(w, strings.Repeat(string(rune('a'+i)), 5000))
				w.(http.Flusher).Flush()
			}
		case "/length":
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		case "/upload":
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
		}
	}))
	e.to(elsewhere(up))
	c := e.client(nil)
	base := "http://plain.test:" + port(up)
	conns := 0
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if !i.Reused {
			conns++
		}
	}}
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
		wantLength         int64
	}{
		{"GET", "/empty", "", 200, "", 0},
		{"GET", "/204", "", 204, "", 0},
		{"GET", "/chunked", "", 200, strings.Repeat("a", 5000) + strings.Repeat("b", 5000) + strings.Repeat("c", 5000), -1},
		{"HEAD", "/length", "", 200, "", 5},
		{"GET", "/length", "", 200, "hello", 5},
		{"POST", "/upload", strings.Repeat("u", 100000), 200, strings.Repeat("u", 100000), -1},
	} {
		req := mustReq(t, tc.method, base+tc.path, tc.body)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.code || string(body) != tc.want {
			t.Errorf("%s %s: got %d %d bytes %v, want %d %d bytes", tc.method, tc.path, resp.StatusCode, len(body), err, tc.code, len(tc.want))
		}
		if tc.wantLength >= 0 && resp.ContentLength != tc.wantLength {
			t.Errorf("%s %s: Content-Length %d, want %d", tc.method, tc.path, resp.ContentLength, tc.wantLength)
		}
	}
	if conns != 1 {
		t.Errorf("%d connections, want 1 kept alive throughout", conns)
	}
}

// TestHTTPUpgradeAndContinue: a protocol upgrade becomes a splice after
// the 101; "Expect: 100-continue" gets its interim answer through.
func TestHTTPUpgradeAndContinue(t *testing.T) {
	e := newEnv(t, Policy{Internet: true, Allow: []string{"plain.test"}})
	up := httpUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "echo" {
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			brw.Flush()
			line, _ := brw.ReadString('\n')
			io.WriteString(conn, "echo: "+line)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	e.to(elsewhere(up))

	got := e.rawExchange("GET / HTTP/1.1\r\nHost: plain.test\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhello\n")
	if !strings.HasPrefix(got, "HTTP/1.1 101 ") || !strings.HasSuffix(got, "echo: hello\n") {
		t.Errorf("upgrade: got %q", got)
	}

	c := e.client(nil)
	c.Transport.(*http.Transport).ExpectContinueTimeout = 5 * time.Second
	req := mustReq(t, "POST", "http://plain.test:"+port(up)+"/", "the body")
	req.Header.Set("Expect", "100-continue")
	start := time.Now()
	code, body, _, err := get(c, req.URL.String(), func(r *http.Request) { *r = *req })
	if err != nil || code != 200 || body != "the body" {
		t.Errorf("100-continue: got %d %q %v", code, body, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("100-continue took %v: the interim response did not get through", d)
	}
}
