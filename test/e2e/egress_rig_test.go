package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/testenv"
)

// The upstreams of the egress tests live in a network namespace the test
// makes, on one veth whose root end is upRoot. 198.18.0.0/15 is for
// benchmarking, never routed on the internet, and on the platform's
// blocklist unless permitted: the servers of these tests pass
// --egress-permit upPrefix (serverFlags). upRoot is an address of the
// host, so the platform must refuse it like every other address of the
// host, permit or not.
const (
	upPrefix  = "198.18.77.0/24"
	upRoot    = "198.18.77.1"
	upAllowed = "198.18.77.2" // allowed.example.test; also a banner, UDP, DNS
	upWild    = "198.18.77.3" // a.wild, b.c.wild and wild.example.test
	upDecoy   = "198.18.77.4" // no name: nobody must ever reach it
	upDenied  = "198.18.77.5" // denied.example.test
	upBadcert = "198.18.77.6" // badcert.example.test, certificate of another CA
	upOpenAI  = "198.18.77.7" // api.openai.test
)

var upAddrs = []string{upAllowed, upWild, upDecoy, upDenied, upBadcert, upOpenAI}

// floodNames is how many names of the DNS flood the hosts file holds: more
// than the platform's 200 new names a minute, so that the flood meets the
// limit without a single query reaching the host's own resolver.
const floodNames = 260

func floodName(i int) string { return fmt.Sprintf("flood-%03d.wild.example.test", i) }

// request is one HTTP request an upstream received.
type request struct {
	Seq    int
	Addr   string // the upstream's address
	Scheme string // http or https
	Port   string
	SNI    string
	Host   string
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   string
}

// arrival is anything else that reached an upstream: a TCP connection
// (every listener records its accepts), a datagram, an ICMP echo.
type arrival struct {
	Seq  int
	Kind string // "tcp", "udp", "icmp"
	To   string // address:port (ICMP: address)
	From string
	Data string
}

// upstreams is the namespace, its veth and every server in it.
type upstreams struct {
	t         *testing.T
	dir       string
	CAFile    string // the test CA, PEM (serve --egress-ca)
	HostsFile string // serve --egress-hosts
	CAPEM     []byte
	ca        *testCA
	otherCA   *testCA

	mu       sync.Mutex
	seq      int
	requests []request
	arrivals []arrival
}

// newUpstreams makes the upstream namespace and its servers; everything
// goes when the test ends, on failure too.
func newUpstreams(t *testing.T) *upstreams {
	t.Helper()
	testenv.RequiresGvisor(t) // root, and the platform the tests need
	u := &upstreams{t: t, dir: t.TempDir()}
	prefix := netip.MustParsePrefix(upPrefix)
	lockUpstreams(t)

	// Nobody else may use the prefix: a host route there would take our
	// packets somewhere we did not make.
	addrs, err := network.CompleteDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && prefix.Contains(ip.Unmap()) {
			t.Fatalf("%s is already on this host (%s): something else uses %s, which these tests need", ip, a.Label, upPrefix)
		}
	}

	nsPath := filepath.Join(u.dir, "upstream-ns")
	if err := network.NewNamespace(nsPath); err != nil {
		t.Fatalf("making the upstream namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := network.RemoveNamespace(nsPath); err != nil {
			t.Errorf("removing the upstream namespace: %v", err)
		}
	})
	nsf, err := os.Open(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer nsf.Close()

	var rnd [3]byte
	rand.Read(rnd[:])
	rootIf := "e2eup" + hex.EncodeToString(rnd[:])
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: rootIf},
		PeerName:      "up0",
		PeerNamespace: netlink.NsFd(nsf.Fd()),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("making veth %s: %v", rootIf, err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(rootIf); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				t.Errorf("deleting veth %s: %v", rootIf, err)
			}
		}
	})
	root, err := netlink.LinkByName(rootIf)
	if err != nil {
		t.Fatal(err)
	}
	// No IPv6 on either end: nothing but what the tests send crosses it.
	os.WriteFile("/proc/sys/net/ipv6/conf/"+rootIf+"/disable_ipv6", []byte("1"), 0)
	if err := netlink.AddrAdd(root, &netlink.Addr{IPNet: ipNet(upRoot, 24)}); err != nil {
		t.Fatalf("adding %s: %v", upRoot, err)
	}
	if err := netlink.LinkSetUp(root); err != nil {
		t.Fatal(err)
	}

	// Inside: the addresses, then every listener, made from a thread in
	// the namespace (a socket keeps the namespace it was made in).
	var ls listeners
	err = network.InNamespace(nsf.Name(), func() error {
		up0, err := netlink.LinkByName("up0")
		if err != nil {
			return err
		}
		os.WriteFile("/proc/sys/net/ipv6/conf/up0/disable_ipv6", []byte("1"), 0)
		for _, a := range upAddrs {
			if err := netlink.AddrAdd(up0, &netlink.Addr{IPNet: ipNet(a, 24)}); err != nil {
				return fmt.Errorf("adding %s: %w", a, err)
			}
		}
		if err := netlink.LinkSetUp(up0); err != nil {
			return err
		}
		// Check the namespace's side before anything is sent to it.
		got, err := netlink.AddrList(up0, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, a := range got {
			have[a.IP.String()] = true
		}
		for _, a := range upAddrs {
			if !have[a] {
				return fmt.Errorf("up0 lacks %s: has %v", a, got)
			}
		}
		return ls.open()
	})
	if err != nil {
		ls.close()
		t.Fatalf("upstream namespace: %v", err)
	}
	t.Cleanup(ls.close)

	// Every upstream address must route to our veth before any packet is
	// sent: a failed set-up must never send test traffic off the machine.
	for _, a := range append([]string{upRoot}, upAddrs...) {
		routes, err := netlink.RouteGet(net.ParseIP(a))
		if err != nil || len(routes) == 0 {
			t.Fatalf("route to %s: %v", a, err)
		}
		if a == upRoot {
			continue // local
		}
		if routes[0].LinkIndex != root.Attrs().Index {
			t.Fatalf("%s routes via interface %d, want %s (%d): refusing to send anything", a, routes[0].LinkIndex, rootIf, root.Attrs().Index)
		}
	}

	u.certificates(t)
	u.writeHosts(t)
	ls.serve(u, t)
	u.selfCheck(t)
	return u
}

// selfCheck sends, from the test itself, a datagram to every UDP listener
// and an echo request to the namespace, and waits until each is recorded:
// a test that says "nothing arrived" then means something.
func (u *upstreams) selfCheck(t *testing.T) {
	t.Helper()
	m := u.mark()
	for _, ap := range udpAt {
		c, err := net.Dial("udp4", ap)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("self-check"))
		c.Close()
	}
	ic, err := icmp.ListenPacket("ip4:icmp", upRoot)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	echo, _ := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 7, Seq: 1, Data: []byte("self-check")}}).Marshal(nil)
	if _, err := ic.WriteTo(echo, &net.IPAddr{IP: net.ParseIP(upAllowed)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(u.arrivalsSince(m, "udp", "")) < len(udpAt) || len(u.arrivalsSince(m, "icmp", "")) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the upstreams' own listeners did not see the self-check: %+v", u.arrivalsSince(m, "", ""))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// upstreamsLock is held by the one test process on the host that has the
// upstreams' prefix: other runs wait for it.
const upstreamsLock = "/run/withruntime/e2e-upstreams.lock"

// lockUpstreams takes the host-wide lock for the upstreams' prefix until
// the test ends, and removes what a run that died (SIGKILL, a machine
// crash) left behind: its veth and its pinned namespace.
func lockUpstreams(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(upstreamsLock), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(upstreamsLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			f.Close()
			t.Fatalf("another test run has held %s for 5 minutes", upstreamsLock)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() { f.Close() })
	links, _ := network.CompleteDump(netlink.LinkList)
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, "e2eup") && l.Type() == "veth" {
			netlink.LinkDel(l)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasSuffix(f[4], "/upstream-ns") {
			network.RemoveNamespace(f[4])
		}
	}
}

func ipNet(a string, bits int) *net.IPNet {
	return &net.IPNet{IP: net.ParseIP(a).To4(), Mask: net.CIDRMask(bits, 32)}
}

// listeners are the upstreams' sockets, all made inside the namespace.
type listeners struct {
	https   map[string]net.Listener // address:port
	http    map[string]net.Listener
	banner  []net.Listener
	tcpDNS  net.Listener
	udp     []net.PacketConn // 9999, QUIC 443, DNS 53
	icmp    net.PacketConn
	servers []*http.Server
}

// Where each server listens. Every address has HTTP on 80 and HTTPS on
// 443; some have more ports, to show that a policy covers every port.
var (
	httpsPorts = map[string][]string{upAllowed: {"443"}, upWild: {"443"}, upDecoy: {"443"}, upDenied: {"443", "8443"}, upBadcert: {"443"}, upOpenAI: {"443"}}
	httpPorts  = map[string][]string{upAllowed: {"80", "8080"}, upWild: {"80"}, upDecoy: {"80"}, upDenied: {"80"}, upBadcert: {"80"}, upOpenAI: {"80"}}
	bannerAt   = []string{upAllowed + ":22", upDecoy + ":22"}
	udpAt      = []string{upAllowed + ":9999", upAllowed + ":443", upAllowed + ":53"}
)

const banner = "SSH-2.0-e2e-upstream\r\n"

func (ls *listeners) open() error {
	ls.https, ls.http = map[string]net.Listener{}, map[string]net.Listener{}
	for a, ports := range httpsPorts {
		for _, p := range ports {
			l, err := net.Listen("tcp4", a+":"+p)
			if err != nil {
				return err
			}
			ls.https[a+":"+p] = l
		}
	}
	for a, ports := range httpPorts {
		for _, p := range ports {
			l, err := net.Listen("tcp4", a+":"+p)
			if err != nil {
				return err
			}
			ls.http[a+":"+p] = l
		}
	}
	for _, ap := range bannerAt {
		l, err := net.Listen("tcp4", ap)
		if err != nil {
			return err
		}
		ls.banner = append(ls.banner, l)
	}
	var err error
	if ls.tcpDNS, err = net.Listen("tcp4", upAllowed+":53"); err != nil {
		return err
	}
	for _, ap := range udpAt {
		c, err := net.ListenPacket("udp4", ap)
		if err != nil {
			return err
		}
		ls.udp = append(ls.udp, c)
	}
	// A raw socket sees every ICMP packet that comes into the namespace.
	ls.icmp, err = net.ListenPacket("ip4:icmp", "0.0.0.0")
	return err
}

func (ls *listeners) close() {
	for _, s := range ls.servers {
		s.Close()
	}
	for _, l := range ls.https {
		l.Close()
	}
	for _, l := range ls.http {
		l.Close()
	}
	for _, l := range ls.banner {
		l.Close()
	}
	if ls.tcpDNS != nil {
		ls.tcpDNS.Close()
	}
	for _, c := range ls.udp {
		c.Close()
	}
	if ls.icmp != nil {
		ls.icmp.Close()
	}
}

// recordingListener notes every accepted connection.
type recordingListener struct {
	net.Listener
	u *upstreams
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.u.arrive(arrival{Kind: "tcp", To: c.LocalAddr().String(), From: c.RemoteAddr().String()})
	}
	return c, err
}

// serve starts every server, from ordinary goroutines.
func (ls *listeners) serve(u *upstreams, t *testing.T) {
	good, bad := u.leaf(false), u.leaf(true)
	for ap, l := range ls.https {
		cert := good
		if strings.HasPrefix(ap, upBadcert+":") {
			cert = bad
		}
		s := &http.Server{Handler: u.handler(ap, "https"), ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog()}
		ls.servers = append(ls.servers, s)
		tl := tls.NewListener(recordingListener{l, u}, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
		go s.Serve(tl)
	}
	for ap, l := range ls.http {
		s := &http.Server{Handler: u.handler(ap, "http"), ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog()}
		ls.servers = append(ls.servers, s)
		go s.Serve(recordingListener{l, u})
	}
	for _, l := range ls.banner {
		go func(l net.Listener) {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					c.SetDeadline(time.Now().Add(10 * time.Second))
					c.Write([]byte(banner))
					data, _ := io.ReadAll(io.LimitReader(c, 4096))
					u.arrive(arrival{Kind: "tcp", To: c.LocalAddr().String(), From: c.RemoteAddr().String(), Data: string(data)})
				}()
			}
		}(l)
	}
	go func() {
		for {
			c, err := ls.tcpDNS.Accept()
			if err != nil {
				return
			}
			u.arrive(arrival{Kind: "tcp", To: c.LocalAddr().String(), From: c.RemoteAddr().String()})
			c.Close()
		}
	}()
	for _, c := range append(ls.udp, ls.icmp) {
		go func(c net.PacketConn) {
			buf := make([]byte, 65536)
			for {
				n, from, err := c.ReadFrom(buf)
				if err != nil {
					return
				}
				kind, to := "udp", c.LocalAddr().String()
				if c == ls.icmp {
					// Only echo requests count: the namespace's own
					// replies and errors are not arrivals.
					if n == 0 || buf[0] != 8 {
						continue
					}
					kind = "icmp"
				}
				u.arrive(arrival{Kind: kind, To: to, From: from.String(), Data: string(buf[:n])})
			}
		}(c)
	}
}

// handler records every request and answers it. /redirect sends the client
// to https://denied.example.test/ (or to ?to=); /echo sends back the
// Authorization header (in X-Echo-Authorization and the body) and the
// body, uncompressed.
func (u *upstreams) handler(listenAddr, scheme string) http.Handler {
	addr, port, _ := net.SplitHostPort(listenAddr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		rec := request{Addr: addr, Port: port, Scheme: scheme, Host: r.Host, Method: r.Method,
			Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(body)}
		if r.TLS != nil {
			rec.SNI = r.TLS.ServerName
		}
		u.mu.Lock()
		u.seq++
		rec.Seq = u.seq
		u.requests = append(u.requests, rec)
		u.mu.Unlock()
		switch r.URL.Path {
		case "/redirect":
			to := r.URL.Query().Get("to")
			if to == "" {
				to = "https://denied.example.test/"
			}
			http.Redirect(w, r, to, http.StatusFound)
		case "/echo-split":
			// The echo in pieces, the header's value split across
			// writes: a proxy that scrubs block by block would miss it.
			auth := r.Header.Get("Authorization")
			w.Header().Set("Content-Type", "text/plain")
			f, _ := w.(http.Flusher)
			if len(auth) < 8 {
				http.Error(w, "no Authorization to split", http.StatusBadRequest)
				return
			}
			half := len(auth) / 2
			for _, part := range []string{"authorization=" + auth[:half], auth[half : half+3], auth[half+3:] + "\n"} {
				io.WriteString(w, part)
				f.Flush()
				time.Sleep(30 * time.Millisecond)
			}
		case "/close-delimited":
			closeDelimited(w, r) // egress_details_test.go
		case "/echo":
			auth := r.Header.Get("Authorization")
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-Echo-Authorization", auth)
			fmt.Fprintf(w, "authorization=%s\nbody=%s\nquery=%s\n", auth, body, r.URL.RawQuery)
		default:
			fmt.Fprintf(w, "hello from %s over %s at %s\n", r.Host, scheme, addr)
		}
	})
}

func (u *upstreams) arrive(a arrival) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seq++
	a.Seq = u.seq
	u.arrivals = append(u.arrivals, a)
}

// mark is a point in the upstreams' history.
func (u *upstreams) mark() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seq
}

// requestsSince lists the requests after mark that match keep.
func (u *upstreams) requestsSince(mark int, keep func(request) bool) []request {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []request
	for _, r := range u.requests {
		if r.Seq > mark && (keep == nil || keep(r)) {
			out = append(out, r)
		}
	}
	return out
}

// arrivalsSince lists what reached the upstreams after mark at to (an
// address or address:port; "" for all) of the given kind ("" for all).
func (u *upstreams) arrivalsSince(mark int, kind, to string) []arrival {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []arrival
	for _, a := range u.arrivals {
		if a.Seq > mark && (kind == "" || a.Kind == kind) && (to == "" || a.To == to || strings.HasPrefix(a.To, to+":")) {
			out = append(out, a)
		}
	}
	return out
}

// allRequests is every request so far.
func (u *upstreams) allRequests() []request { return u.requestsSince(0, nil) }

// at keeps requests that reached address addr.
func at(addr string) func(request) bool { return func(r request) bool { return r.Addr == addr } }

// settle waits a moment for arrivals in flight (a connection being
// accepted while the sandbox's command ended) before a test says that
// nothing arrived.
func settle() { time.Sleep(200 * time.Millisecond) }

// certificates makes the test CA (which signs every upstream's
// certificate but badcert's) and another CA for badcert.example.test.
func (u *upstreams) certificates(t *testing.T) {
	t.Helper()
	u.ca = newCA(t, "withruntime e2e test CA")
	u.otherCA = newCA(t, "another CA nobody trusts")
	u.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: u.ca.cert.Raw})
	u.CAFile = filepath.Join(u.dir, "test-ca.pem")
	if err := os.WriteFile(u.CAFile, u.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
}

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T, name string) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key}
}

// leaf is the upstreams' certificate: every test name from the test CA,
// or (bad) badcert.example.test from the other CA.
func (u *upstreams) leaf(bad bool) tls.Certificate {
	t := u.t
	names := []string{"allowed.example.test", "a.wild.example.test", "b.c.wild.example.test", "wild.example.test",
		"denied.example.test", "api.openai.test"}
	ca := u.ca
	if bad {
		names, ca = []string{"badcert.example.test"}, u.otherCA
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// writeHosts writes the platform's hosts file: every name a test resolves
// is in it, so that no query ever reaches the host's own resolver.
func (u *upstreams) writeHosts(t *testing.T) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s allowed.example.test\n", upAllowed)
	fmt.Fprintf(&b, "%s a.wild.example.test b.c.wild.example.test wild.example.test\n", upWild)
	fmt.Fprintf(&b, "%s denied.example.test\n", upDenied)
	fmt.Fprintf(&b, "%s badcert.example.test\n", upBadcert)
	fmt.Fprintf(&b, "%s api.openai.test\n", upOpenAI)
	// A name of a blocked address: the platform must never hand it out.
	fmt.Fprintf(&b, "169.254.169.254 metadata.example.test\n")
	for i := range floodNames {
		fmt.Fprintf(&b, "%s %s\n", upWild, floodName(i))
	}
	u.HostsFile = filepath.Join(u.dir, "hosts")
	if err := os.WriteFile(u.HostsFile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// quietLog drops the upstream servers' own complaints (TLS handshakes the
// proxy abandons on purpose, say).
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

// serverFlags are the serve flags that point the platform at these
// upstreams and let sandboxes reach their prefix, which the platform's
// blocklist refuses otherwise.
func (u *upstreams) serverFlags() []string {
	// A DNS rate above the name flood's (260 names in a blink): that test
	// is about the distinct-names limit, and the rate limit has its own.
	return []string{"--egress-hosts", u.HostsFile, "--egress-ca", u.CAFile, "--egress-permit", upPrefix,
		"--egress-dns-rate", "5000"}
}
