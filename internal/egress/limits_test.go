package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// holdingUpstream accepts connections, echoes lines and holds every
// connection open until the peer closes it; it counts the connections it
// has open and reports each one's end on closed. With hold set, a
// connection the peer half-closes is not closed but handed to held, as a
// server that never closes its end would.
type holdingUpstream struct {
	addr   string
	hold   bool
	held   chan net.Conn
	mu     sync.Mutex // guards open
	open   int
	closed chan struct{}
}

func newHoldingUpstream(t *testing.T) *holdingUpstream {
	t.Helper()
	l := listen(t)
	u := &holdingUpstream{addr: l.Addr().String(), closed: make(chan struct{}, 10000), held: make(chan net.Conn, 100)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.open++
			u.mu.Unlock()
			go func() {
				defer func() {
					c.Close()
					u.mu.Lock()
					u.open--
					u.mu.Unlock()
					u.closed <- struct{}{}
				}()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err == io.EOF && u.hold {
						u.held <- c
						select {} // never closes it
					}
					if err != nil {
						return
					}
					io.WriteString(c, "+"+line)
				}
			}()
		}
	}()
	return u
}

func (u *holdingUpstream) openConns() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.open
}

// waitFor polls cond for up to 10 s: for liveness, not speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dialProxy opens a "sandbox" connection through the proxy and checks that
// a line makes the round trip.
func (e *env) dialProxy(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp4", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if line != "+ping\n" {
		t.Fatalf("through the proxy: got %q %v, want +ping", line, err)
	}
	c.SetDeadline(time.Time{})
	return c
}

// closedByPeer reports whether c's peer closed it (EOF or reset) within
// 10 s.
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

func TestConnectionLimit(t *testing.T) {
	e := newEnv(t, Policy{Internet: true}, func(c *Config) { c.MaxConns = 3 })
	up := newHoldingUpstream(t)
	e.toAddr(up.addr)
	var held []net.Conn
	for range 3 {
		held = append(held, e.dialProxy(t))
	}
	if got := e.p.Conns(sandboxID); got != 3 {
		t.Fatalf("got %d connections of the sandbox, want 3", got)
	}

	// One more is closed before anything reaches the upstream.
	extra, err := net.Dial("tcp4", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	io.WriteString(extra, "ping\n")
	if !closedByPeer(extra) {
		t.Error("the connection past the limit is still open")
	}
	e.wantEvent("tcp", "", Refused, "connection limit")
	if got := up.openConns(); got != 3 {
		t.Errorf("the upstream holds %d connections, want 3", got)
	}

	// DNS over TCP counts too; UDP is not a connection.
	dns, err := net.Dial("tcp4", e.dnsTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	if !closedByPeer(dns) {
		t.Error("a DNS-over-TCP connection past the limit is still open")
	}
	e.wantEvent("dns", "", Refused, "connection limit")
	if rcode, _ := e.query(t, "udp", "plain.test", qA); rcode != 0 {
		t.Errorf("DNS over UDP at the connection limit: got %v, want an answer", rcode)
	}

	// A connection that ends frees its slot.
	held[0].Close()
	waitFor(t, "the closed connection's slot is still taken", func() bool { return e.p.Conns(sandboxID) == 2 })
	held[0] = e.dialProxy(t)

	// The sandbox ends: every one of its connections goes, both ends.
	e.p.Release(sandboxID)
	for i, c := range held {
		if !closedByPeer(c) {
			t.Errorf("connection %d is still open after Release", i)
		}
	}
	waitFor(t, "upstream connections still open after Release", func() bool { return up.openConns() == 0 })
	waitFor(t, "the sandbox still holds connections after Release", func() bool { return e.p.Conns(sandboxID) == 0 })
	e.dialProxy(t) // the slots are free again
}

func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	e := newEnv(t, Policy{Internet: true}, func(c *Config) { c.IdleTimeout = idle })
	up := newHoldingUpstream(t)
	e.toAddr(up.addr)

	t.Run("traffic keeps a connection", func(t *testing.T) {
		c := e.dialProxy(t)
		br := bufio.NewReader(c)
		for end := time.Now().Add(3 * idle); time.Now().Before(end); {
			time.Sleep(idle / 4)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, "again\n")
			if line, err := br.ReadString('\n'); line != "+again\n" {
				t.Fatalf("a busy connection was cut after its idle timeout: %q %v", line, err)
			}
		}
		c.Close()
	})

	t.Run("silence closes both ends", func(t *testing.T) {
		before := len(up.closed)
		c := e.dialProxy(t)
		if !closedByPeer(c) {
			t.Fatal("an idle connection is still open")
		}
		waitFor(t, "the upstream end of an idle connection is still open", func() bool { return len(up.closed) > before })
	})

	t.Run("a sandbox that closed leaves no upstream open", func(t *testing.T) {
		// The upstream never closes its end nor writes: before idle
		// timeouts, the proxy's ends stayed open (the sandbox's in
		// CLOSE-WAIT) for good.
		hold := newHoldingUpstream(t)
		hold.hold = true
		e.toAddr(hold.addr)
		c := e.dialProxy(t)
		c.Close()
		held := <-hold.held // the half-close reached the upstream
		waitFor(t, "the sandbox still holds the connection", func() bool { return e.p.Conns(sandboxID) == 0 })
		// The proxy's end is gone: a write meets a reset.
		waitFor(t, "the proxy's upstream end is still open", func() bool {
			_, err := held.Write([]byte("late\n"))
			return err != nil
		})
		held.Close()
	})
}

// syncBuffer is a log destination for several goroutines.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// failingListener fails its first n Accepts with err.
type failingListener struct {
	net.Listener
	mu  sync.Mutex // guards n
	n   int
	err error
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.n > 0
	l.n--
	l.mu.Unlock()
	if fail {
		return nil, l.err
	}
	return l.Listener.Accept()
}

// failingPacketConn fails its first n ReadFroms with err.
type failingPacketConn struct {
	net.PacketConn
	mu  sync.Mutex // guards n
	n   int
	err error
}

func (c *failingPacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	c.mu.Lock()
	fail := c.n > 0
	c.n--
	c.mu.Unlock()
	if fail {
		return 0, nil, c.err
	}
	return c.PacketConn.ReadFrom(b)
}

func TestAcceptLoopsSurviveErrors(t *testing.T) {
	sysErr := func(op string, errno syscall.Errno) error {
		return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
	}
	for _, tc := range []struct {
		name  string
		errno syscall.Errno
	}{
		{"EMFILE", syscall.EMFILE},
		{"ENFILE", syscall.ENFILE},
		{"ENOBUFS, not temporary to net", syscall.ENOBUFS},
		{"ENOMEM, not temporary to net", syscall.ENOMEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged syncBuffer
			e := newEnv(t, Policy{Internet: true}, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logged, nil)) })
			up := httpUpstream(t, hostEcho)
			e.toAddr(up)
			// The proxy's listener fails 6 times (backoff 5+10+...+160 ms)
			// before it accepts again.
			fl := &failingListener{Listener: listen(t), n: 6, err: sysErr("accept", tc.errno)}
			served := make(chan error, 1)
			go func() { served <- e.p.Serve(fl) }()
			e.addr = fl.Addr().String()
			st, body, _, err := get(e.client(nil), "http://plain.test:"+port(up)+"/x")
			if err != nil || st != 200 || !strings.HasPrefix(body, "host=plain.test:") {
				t.Errorf("after %s: got %d %q %v, want the upstream's answer", tc.name, st, body, err)
			}
			select {
			case err := <-served:
				t.Fatalf("Serve returned %v after %s, want it to keep serving", err, tc.name)
			default:
			}

			// DNS: both loops fail the same way, then answer.
			udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			tcp := listen(t)
			ctx, cancel := context.WithCancel(context.Background())
			dnsDone := make(chan error, 1)
			go func() {
				dnsDone <- e.p.ServeDNS(ctx,
					&failingPacketConn{PacketConn: udp, n: 6, err: sysErr("read", tc.errno)},
					&failingListener{Listener: tcp, n: 6, err: sysErr("accept", tc.errno)})
			}()
			e.dnsUDP, e.dnsTCP = udp.LocalAddr().String(), tcp.Addr().String()
			for _, network := range []string{"udp", "tcp"} {
				if rcode, addrs := e.query(t, network, "plain.test", qA); rcode != 0 || len(addrs) != 1 {
					t.Errorf("DNS over %s after %s: got %v %v, want an answer", network, tc.name, rcode, addrs)
				}
			}

			for _, loop := range []string{"proxy accept", "DNS over TCP accept", "DNS over UDP read"} {
				if !strings.Contains(logged.String(), `loop="`+loop+`"`) {
					t.Errorf("the %s loop's retries were not logged: %s", loop, logged.String())
				}
			}

			// Only closing ends the loops.
			fl.Close()
			select {
			case err := <-served:
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("Serve after its listener closed: got %v, want net.ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Serve goes on after its listener closed")
			}
			cancel()
			if err := <-dnsDone; err != nil {
				t.Errorf("ServeDNS after its context ended: got %v, want nil", err)
			}
		})
	}
}

func TestDNSLimits(t *testing.T) {
	t.Run("rate", func(t *testing.T) {
		e := newEnv(t, Policy{Internet: true}, func(c *Config) { c.DNSQueriesPerSecond = 5 })
		var clock atomic.Int64
		clock.Store(time.Now().UnixNano())
		e.p.dnsLimit.mu.Lock()
		e.p.dnsLimit.now = func() time.Time { return time.Unix(0, clock.Load()) }
		e.p.dnsLimit.mu.Unlock()
		for i := range 5 {
			if rcode, _ := e.query(t, "udp", "plain.test", qA); rcode != 0 {
				t.Fatalf("query %d within the rate: got %v, want an answer", i, rcode)
			}
		}
		if rcode, _ := e.query(t, "udp", "plain.test", qA); rcode != rcodeRefused {
			t.Errorf("a query past the rate: got %v, want REFUSED", rcode)
		}
		e.wantEvent("dns", "plain.test", Refused, "DNS rate limit")
		clock.Add(int64(time.Second))
		if rcode, _ := e.query(t, "tcp", "plain.test", qA); rcode != 0 {
			t.Errorf("a second later: got %v, want an answer", rcode)
		}
		e.p.Release(sandboxID) // a new sandbox at the address starts afresh
	})
	t.Run("concurrency", func(t *testing.T) {
		release := make(chan struct{})
		var started sync.WaitGroup
		started.Add(2)
		e := newEnv(t, Policy{Internet: true}, func(c *Config) {
			c.DNSInflight = 2
			c.Lookup = func(ctx context.Context, name string) ([]netip.Addr, error) {
				started.Done()
				<-release // the host's resolver hangs
				return []netip.Addr{netip.MustParseAddr("198.18.0.7")}, nil
			}
		})
		results := make(chan int, 2)
		for i := range 2 {
			go func() {
				rcode, _ := e.query(t, "udp", "slow"+string(rune('a'+i))+".far.test", qA)
				results <- int(rcode)
			}()
		}
		started.Wait()
		if rcode, _ := e.query(t, "udp", "plain.test", qA); rcode != rcodeRefused {
			t.Errorf("a third query while two hang: got %v, want REFUSED", rcode)
		}
		e.wantEvent("dns", "plain.test", Refused, "DNS concurrency limit")
		close(release)
		for range 2 {
			if rcode := <-results; rcode != 0 {
				t.Errorf("a slow query: got %v, want an answer", rcode)
			}
		}
		if rcode, _ := e.query(t, "udp", "plain.test", qA); rcode != 0 {
			t.Errorf("once they answered: got %v, want an answer", rcode)
		}
	})
}

func TestPermit(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{"198.18.0.0/15", ""},
		{"10.20.0.0/16", ""},
		{"fd00::/8", ""},
		{"198.18.0.0", "want a CIDR"},
		{"nonsense", "want a CIDR"},
		{"198.18.0.1/15", "host bits set"},
		{"127.0.0.0/8", "the host itself"},
		{"0.0.0.0/0", "the host itself"},
		{"::1/128", "the host itself"},
		{"::ffff:198.18.0.0/111", "as IPv4"},
	} {
		_, err := ParsePermit(tc.in)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParsePermit(%q) = %v, want error containing %q", tc.in, err, tc.err)
		}
	}

	b := NewBlocklist(netip.MustParsePrefix("10.20.30.0/24"))
	b.permit = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("10.20.0.0/16")}
	for _, tc := range []struct {
		addr    string
		blocked bool
	}{
		{"198.18.77.2", false},
		{"::ffff:198.18.77.2", false},
		{"10.20.1.1", false},
		{"10.20.30.4", true}, // Blocked (the sandboxes' pool) stays blocked
		{"10.21.0.1", true},
		{"198.20.0.1", false},
		{"169.254.169.254", true},
	} {
		if got := b.Blocked(netip.MustParseAddr(tc.addr)); got != tc.blocked {
			t.Errorf("with permits, Blocked(%s) = %v, want %v", tc.addr, got, tc.blocked)
		}
	}
	if _, err := NewProxy(Config{Directory: &directory{}, OriginalDst: func(*net.TCPConn) (netip.AddrPort, error) { return netip.AddrPort{}, nil },
		Permit: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}); err == nil {
		t.Error("NewProxy with loopback permitted: got no error")
	}
}
