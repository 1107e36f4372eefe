package egress

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A client that says nothing for longer than the peek timeout (a loaded
// host, an emulated CPU) is not taken for a server-first protocol while
// the server has not spoken: its ClientHello or request head, when it
// comes, is routed as if it had come at once.

// slowDial connects to the proxy and waits past the peek timeout.
func (e *env) slowDial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp4", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	time.Sleep(DefaultPeekTimeout + 300*time.Millisecond)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func TestSlowClientHelloStillTerminated(t *testing.T) {
	m := newMITMEnv(t)
	for _, handedOut := range []bool{false, true} {
		if handedOut {
			// The address is one opaque TCP may reach: the proxy dials it
			// while it waits, then drops that dial for the named route.
			m.toAddr(m.up)
			m.dir.setPolicy(Policy{Internet: true})
		}
		c := m.slowDial(t)
		tc := tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: pool(t, m.ca.CertPEM())})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handed out %v: the handshake after a pause failed (%v): the proxy spliced it to the upstream", handedOut, err)
		}
		io.WriteString(tc, "GET /check HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer "+placeholder+"\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("handed out %v: got %d %q, want the real value swapped in", handedOut, resp.StatusCode, body)
		}
		m.wantEvent("tls", "api.test", Allowed, "TLS terminated")
	}
}

func TestSlowHTTPClientStillChecked(t *testing.T) {
	e := newEnv(t, Policy{Internet: true})
	up := httpUpstream(t, hostEcho)
	e.toAddr(up)
	// Spliced as opaque TCP, this would reach the upstream with any Host.
	c := e.slowDial(t)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: 169.254.169.254\r\nConnection: close\r\n\r\n")
	got, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(got), "HTTP/1.1 502") {
		t.Errorf("a blocked Host after a pause: got %q, want 502", got)
	}
	e.wantEvent("http", "169.254.169.254", Refused, "blocked address")

	c = e.slowDial(t)
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: plain.test\r\nConnection: close\r\n\r\n")
	got, _ = io.ReadAll(c)
	if !strings.HasPrefix(string(got), "HTTP/1.1 200") || !strings.Contains(string(got), "path=/slow") {
		t.Errorf("an allowed Host after a pause: got %q, want 200", got)
	}
	e.wantEvent("http", "plain.test", Allowed, "")
}

func TestSlowOpaqueClientFirst(t *testing.T) {
	e := newEnv(t, Policy{Internet: true})
	e.toAddr(lineEchoUpstream(t))
	c := e.slowDial(t)
	io.WriteString(c, "PING\r\n")
	if got, _ := io.ReadAll(c); string(got) != "+PING\r\n" {
		t.Errorf("client-first opaque after a pause: got %q, want +PING", got)
	}
	e.wantEvent("tcp", "", Allowed, "")

	// Server-first after the pause: the banner comes through at once.
	e.toAddr(bannerUpstream(t))
	c = e.slowDial(t)
	if got, _ := io.ReadAll(c); string(got) != "SSH-2.0-test\r\n" {
		t.Errorf("server-first: got %q, want the banner", got)
	}
}

// A server that speaks the moment it is dialed, however the proxy's
// goroutines interleave: its banner is never held back until the client's
// idle timeout (found as an e2e banner that timed out under load).
func TestSilentServerFirstNeverWaits(t *testing.T) {
	e := newEnv(t, Policy{Internet: true}, func(c *Config) { c.PeekTimeout = 10 * time.Millisecond })
	e.toAddr(bannerUpstream(t))
	for i := range 200 {
		c, err := net.Dial("tcp4", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) != "SSH-2.0-test\r\n" {
			t.Fatalf("connection %d: got %q, want the banner at once", i, got)
		}
	}
}
