package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// GET /ports/{port}/connect joins the request's connection to a TCP
// connection to the port inside the sandbox: the host's end of a preview
// URL or a port forward. The agent dials 127.0.0.1 (then ::1), so services
// bound only to the sandbox's loopback are reached too, and nothing else:
// the host names no address, only a port.
//
// The answer is 101 Switching Protocols (Upgrade: withruntime-tcp) once
// the dial succeeded; after it the connection carries the TCP stream's
// bytes both ways. A port with nothing listening answers 502 at once.

// PortUpgrade is the protocol name of a port connection.
const PortUpgrade = "withruntime-tcp"

const (
	// portDialTimeout bounds the dial of a port: loopback answers at once
	// or not at all.
	portDialTimeout = 5 * time.Second
	// maxPortConns bounds the port connections open at once; the host
	// bounds them per sandbox well below.
	maxPortConns = 4096
)

// portConns counts the port connections open.
type portConns struct {
	mu sync.Mutex
	n  int
}

func (p *portConns) acquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n >= maxPortConns {
		return false
	}
	p.n++
	return true
}

func (p *portConns) release() {
	p.mu.Lock()
	p.n--
	p.mu.Unlock()
}

func (s *Server) handlePortConnect(w http.ResponseWriter, r *http.Request) error {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		return invalidf("port must be 1 to 65535, not %q", r.PathValue("port"))
	}
	if r.Header.Get("Upgrade") != PortUpgrade {
		return invalidf("GET /ports/{port}/connect needs Upgrade: %s", PortUpgrade)
	}
	if !s.ports.acquire() {
		return conflictf("%d port connections are open, the most there may be", maxPortConns)
	}
	defer s.ports.release()
	conn, err := dialLoopback(r.Context(), port)
	if err != nil {
		var re *reqError
		if errors.As(err, &re) {
			return err
		}
		return &reqError{codeBadGateway, fmt.Sprintf("nothing answers on port %d in the sandbox: %v", port, err)}
	}
	defer conn.Close()
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return err
	}
	defer client.Close()
	// The deadlines the server set for reading the request stay on the
	// hijacked connection: a stream may be idle for as long as it likes.
	_ = client.SetDeadline(time.Time{})
	if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + PortUpgrade + "\r\n\r\n"); err != nil {
		return nil
	}
	if err := brw.Flush(); err != nil {
		return nil
	}
	// What the host sent after the request is already in brw's buffer.
	splice(conn, struct {
		io.Reader
		io.Writer
	}{brw.Reader, client}, client)
	return nil
}

// dialLoopback dials port on the sandbox's loopback, IPv4 first.
func dialLoopback(ctx context.Context, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: portDialTimeout}
	p := strconv.Itoa(port)
	conn, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", p))
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		return conn, err
	}
	if c6, err6 := d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", p)); err6 == nil {
		return c6, nil
	}
	return nil, err
}

// splice copies a to b and b to a. A direction that ends half-closes its
// destination when it can, so protocols that end a request by closing
// their side still work; the other direction then has halfCloseWait to
// finish before both ends close, so a peer that never closes holds
// nothing for long. closeB is b's connection.
func splice(a net.Conn, b io.ReadWriter, closeB io.Closer) {
	done := make(chan struct{}, 2)
	closeWrite := func(c io.Closer) {
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			return
		}
		_ = c.Close()
	}
	go func() {
		_, _ = io.Copy(a, b)
		closeWrite(a)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(b, a)
		closeWrite(closeB)
		done <- struct{}{}
	}()
	<-done
	select {
	case <-done:
	case <-time.After(halfCloseWait):
	}
	_ = a.Close()
	_ = closeB.Close()
}

// halfCloseWait is how long a port connection stays half-closed.
const halfCloseWait = 30 * time.Second
