package agent

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// portRequest sends GET /ports/{port}/connect to the agent on a raw
// connection and returns it with the answer read.
func (a *testAgent) portRequest(port, upgrade string) (net.Conn, *bufio.Reader, *http.Response) {
	a.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(a.url, "http://"))
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET /ports/" + port + "/connect HTTP/1.1\r\nHost: sandbox-agent\r\nConnection: Upgrade\r\n"
	if upgrade != "" {
		req += "Upgrade: " + upgrade + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		a.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	return c, br, resp
}

// TestPortConnect: the agent joins the connection to a port on loopback;
// the stream carries bytes both ways, the server's greeting first, and a
// half-close reaches the server, whose answer still comes back.
func TestPortConnect(t *testing.T) {
	a := newTestAgent(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "hello\n")
		b, _ := io.ReadAll(c) // until the client's half-close
		io.WriteString(c, "got:"+string(b))
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	c, br, resp := a.portRequest(port, PortUpgrade)
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != PortUpgrade {
		t.Fatalf("answer %s, Upgrade %q", resp.Status, resp.Header.Get("Upgrade"))
	}
	if line, err := br.ReadString('\n'); line != "hello\n" {
		t.Fatalf("greeting %q, %v", line, err)
	}
	io.WriteString(c, "ping")
	c.(*net.TCPConn).CloseWrite()
	rest, err := io.ReadAll(br)
	if string(rest) != "got:ping" {
		t.Fatalf("after the half-close: %q, %v", rest, err)
	}
}

// TestPortConnectRefused: bad requests are refused before anything is
// dialed; a port with nothing listening is 502.
func TestPortConnectRefused(t *testing.T) {
	a := newTestAgent(t)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close() // nothing listens there now
	for _, tc := range []struct {
		port, upgrade string
		status        int
	}{
		{"0", PortUpgrade, 400},
		{"65536", PortUpgrade, 400},
		{"x", PortUpgrade, 400},
		{port, "websocket", 400},
		{port, PortUpgrade, 502},
	} {
		_, _, resp := a.portRequest(tc.port, tc.upgrade)
		if resp.StatusCode != tc.status {
			t.Errorf("port %s Upgrade %q: got %s, want %d", tc.port, tc.upgrade, resp.Status, tc.status)
		}
	}
}
