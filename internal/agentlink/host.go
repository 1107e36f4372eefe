package agentlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/withruntime/withruntime/internal/backoff"
)

// maxSpares bounds the connections a sandbox can have waiting on the host:
// past it, the host closes what it accepts. The agent keeps far fewer.
const maxSpares = 16

// opWriteTimeout bounds the one byte the host writes when it takes a spare.
const opWriteTimeout = 5 * time.Second

// Host is the host's end of one sandbox's link: it accepts the agent's
// connections and hands them out for requests.
type Host struct {
	l     net.Listener
	spare chan net.Conn
	done  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex // guards open and closed
	open   map[net.Conn]struct{}
	closed bool
}

// Serve accepts the agent's connections on l until Close.
func Serve(l net.Listener) *Host {
	h := &Host{l: l, spare: make(chan net.Conn, maxSpares), done: make(chan struct{}), open: map[net.Conn]struct{}{}}
	h.wg.Add(1)
	go h.accept()
	return h
}

func (h *Host) accept() {
	defer h.wg.Done()
	var delay time.Duration
	for {
		c, err := h.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: wait and retry, as net/http does.
			delay = backoff.Next(delay, 5*time.Millisecond, time.Second)
			select {
			case <-h.done:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		if !h.track(c) {
			c.Close()
			return
		}
		select {
		case h.spare <- c:
		default:
			h.drop(c) // more spares than any agent keeps
		}
	}
}

func (h *Host) track(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.open[c] = struct{}{}
	return true
}

func (h *Host) drop(c net.Conn) {
	h.mu.Lock()
	delete(h.open, c)
	h.mu.Unlock()
	c.Close()
}

// take returns a live spare with op written to it.
func (h *Host) take(ctx context.Context, op byte) (net.Conn, error) {
	for {
		var c net.Conn
		select {
		case c = <-h.spare:
		case <-h.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the agent: %w", ctx.Err())
		}
		if !quiet(c) {
			h.drop(c) // closed by the agent, or it spoke first
			continue
		}
		c.SetWriteDeadline(time.Now().Add(opWriteTimeout))
		if _, err := c.Write([]byte{op}); err != nil {
			h.drop(c)
			continue
		}
		c.SetWriteDeadline(time.Time{})
		return &hostConn{Conn: c, h: h}, nil
	}
}

// quiet reports whether c is open and has nothing to read: an agent never
// writes on a spare before the host has spoken.
func quiet(c net.Conn) bool {
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return peekQuiet(rc)
		}
	}
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [1]byte
	n, err := c.Read(b[:])
	c.SetReadDeadline(time.Time{})
	var ne net.Error
	return n == 0 && errors.As(err, &ne) && ne.Timeout()
}

// Dial returns a connection to the agent for HTTP/1.1 requests. It waits
// for a spare until ctx ends or the link is closed.
func (h *Host) Dial(ctx context.Context) (net.Conn, error) {
	return h.take(ctx, opHTTP)
}

// Ready waits until the agent answers its health route.
func (h *Host) Ready(ctx context.Context) error {
	client := oneShotClient(h.Dial)
	var err error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/healthz", nil)
		var resp *http.Response
		if resp, err = client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("agent answered %s", resp.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the agent: %w", err)
		case <-h.done:
			return ErrClosed
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Suspend asks the agent to let go of every connection before a
// checkpoint, and returns once it has: the agent answers on the control
// connection and closes it last. The listener and every connection are
// closed afterwards, whatever the outcome: the link is done.
func (h *Host) Suspend(ctx context.Context) error {
	defer h.Close()
	c, err := h.take(ctx, opSuspend)
	if err != nil {
		return err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetReadDeadline(d)
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return fmt.Errorf("agent did not confirm the suspend: %w", err)
	}
	if b[0] != ackSuspended {
		return fmt.Errorf("agent answered the suspend with %q", b[0])
	}
	// The agent closes the control connection last: EOF means it holds
	// nothing on the host.
	if n, err := c.Read(b[:]); n != 0 || !errors.Is(err, io.EOF) {
		return fmt.Errorf("agent kept its control connection open")
	}
	return nil
}

// Close stops accepting and closes every connection of the link, spares
// and those in use. It is idempotent.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.done)
	conns := h.open
	h.open = nil
	h.mu.Unlock()
	err := h.l.Close()
	for c := range conns {
		c.Close()
	}
	h.wg.Wait()
	return err
}

// hostConn is a connection handed out; closing it forgets it.
type hostConn struct {
	net.Conn
	h    *Host
	once sync.Once
}

func (c *hostConn) Close() error {
	var err error
	c.once.Do(func() {
		c.h.mu.Lock()
		delete(c.h.open, c.Conn)
		c.h.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}
