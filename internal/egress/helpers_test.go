package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
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

// The unit tests run everything on loopback: the proxy, its upstreams, the
// test's "sandbox" (127.0.0.1 in the Directory). Loopback is on the
// Blocklist by design, so they set Config.UnblockLoopback, and a Dial hook
// that fails the test for any address off loopback, so that nothing is
// ever sent elsewhere. The end-to-end tests (.ci/run) use real network
// namespaces and upstreams in 198.18.0.0/15 without either.

const sandboxID = "sb1"

var sandboxAddr = netip.MustParseAddr("127.0.0.1")

// directory is a Directory of one sandbox at 127.0.0.1 whose policy the
// test changes.
type directory struct {
	mu sync.Mutex // guards sb, ok
	sb Sandbox
	ok bool
}

func (d *directory) SandboxByAddr(a netip.Addr) (Sandbox, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a != sandboxAddr || !d.ok {
		return Sandbox{}, false
	}
	sb := d.sb
	sb.Policy.Allow = append([]string(nil), sb.Policy.Allow...)
	return sb, true
}

func (d *directory) setPolicy(p Policy) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sb.Policy = p
}

// secretStore is a Secrets whose list the test changes.
type secretStore struct {
	mu   sync.Mutex // guards list
	list []Secret
}

func (s *secretStore) ForAccount(account string) ([]Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if account != "acct" {
		return nil, nil
	}
	return append([]Secret(nil), s.list...), nil
}

func (s *secretStore) set(list ...Secret) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = list
}

// env is a proxy serving on loopback with its DNS server.
type env struct {
	t       testing.TB
	p       *Proxy
	dir     *directory
	secrets *secretStore
	ca      *CA
	addr    string // the proxy's listener
	dnsUDP  string
	dnsTCP  string

	mu  sync.Mutex // guards dst
	dst netip.AddrPort
}

// testHosts is the hosts file of the tests: every name on loopback.
const testHosts = `
# ADDRESS NAME...
127.0.0.1 api.test plain.test other.test git.test evil.test
127.0.0.1 a.wild.test b.c.wild.test wild.test bad.test
`

func newEnv(t testing.TB, pol Policy, opts ...func(*Config)) *env {
	t.Helper()
	hosts, err := ParseHosts(strings.NewReader(testHosts))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: &directory{sb: Sandbox{ID: sandboxID, Account: "acct", Policy: pol}, ok: true}, secrets: &secretStore{}, ca: ca}
	cfg := Config{
		Directory: e.dir,
		OriginalDst: func(*net.TCPConn) (netip.AddrPort, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if !e.dst.IsValid() {
				return netip.AddrPort{}, errors.New("no destination set")
			}
			return e.dst, nil
		},
		Secrets: e.secrets,
		CA:      ca,
		Hosts:   hosts,
		Lookup: func(ctx context.Context, name string) ([]netip.Addr, error) {
			if strings.HasSuffix(name, ".far.test") {
				return []netip.Addr{netip.MustParseAddr("198.18.0.7")}, nil // answered, never dialed
			}
			return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
		},
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !ap.Addr().IsLoopback() {
				t.Errorf("the proxy dialed %s: tests dial loopback only", address)
				return nil, errors.New("not loopback")
			}
			var d net.Dialer
			return d.DialContext(ctx, network, address)
		},
		UnblockLoopback: true,
		// A client silent past the peek timeout where no server can
		// speak is refused after this.
		HeadTimeout: 2 * time.Second,
		// Names of *.far.test resolve there: answered, never dialed.
		Permit: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")},
	}
	for _, o := range opts {
		o(&cfg)
	}
	e.p, err = NewProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := listen(t)
	e.addr = l.Addr().String()
	go e.p.Serve(l)
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcp := listen(t)
	e.dnsUDP, e.dnsTCP = udp.LocalAddr().String(), tcp.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.p.ServeDNS(ctx, udp, tcp) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeDNS: %v", err)
		}
		e.p.Close()
	})
	return e
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// to sets the original destination of the next connections.
func (e *env) to(dst netip.AddrPort) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dst = dst
}

// toAddr sets it from a listener's address string.
func (e *env) toAddr(addr string) {
	e.to(netip.MustParseAddrPort(addr))
}

// elsewhere is addr's port on 127.0.0.2, where nothing listens: an address
// of the sandbox's choosing that the proxy must ignore for named traffic.
func elsewhere(addr string) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), netip.MustParseAddrPort(addr).Port())
}

// client is an HTTP client in the sandbox: every connection goes to the
// proxy, whatever the URL says; it trusts roots. It keeps connections
// alive, as clients do.
func (e *env) client(roots *x509.CertPool) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp4", e.addr)
			},
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

// lastEvent is the newest event of the test sandbox's log.
func (e *env) lastEvent() Event {
	e.t.Helper()
	evs := e.p.Log().Events(sandboxID)
	if len(evs) == 0 {
		e.t.Fatal("no event in the log")
	}
	return evs[len(evs)-1]
}

// wantEvent checks the newest event.
func (e *env) wantEvent(kind, name, verdict, reasonPart string) {
	e.t.Helper()
	var ev Event
	// The proxy logs just after the connection's fate is visible to the
	// client; give it a moment.
	for i := 0; i < 100; i++ {
		evs := e.p.Log().Events(sandboxID)
		if len(evs) > 0 {
			ev = evs[len(evs)-1]
			if ev.Kind == kind && ev.Name == name && ev.Verdict == verdict && strings.Contains(ev.Reason, reasonPart) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Errorf("last event %+v, want kind %s name %q verdict %s reason containing %q", ev, kind, name, verdict, reasonPart)
}

func get(c *http.Client, url string, mod ...func(*http.Request)) (int, string, http.Header, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, "", nil, err
	}
	for _, m := range mod {
		m(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, err
}

func pool(t *testing.T, pems ...[]byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, pem := range pems {
		if !p.AppendCertsFromPEM(pem) {
			t.Fatal("no certificate in PEM")
		}
	}
	return p
}

// tlsUpstream is an HTTPS server on loopback with certificates from ca for
// any server name.
func tlsUpstream(t *testing.T, ca *CA, h http.Handler) string {
	t.Helper()
	l := listen(t)
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0), TLSConfig: &tls.Config{
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) { return ca.Leaf(hello.ServerName) },
	}}
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// httpUpstream is a plain HTTP server on loopback.
func httpUpstream(t testing.TB, h http.Handler) string {
	t.Helper()
	l := listen(t)
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// hostEcho answers "host=HOST path=PATH".
var hostEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "host=%s path=%s", r.Host, r.URL.RequestURI())
})

func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
