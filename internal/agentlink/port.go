package agentlink

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
)

// A microVM's agent has one byte stream to the host (a virtio-serial
// port), not a socket it can dial again and again. Over it the two ends
// run yamux, so that each of the agent's "dials" is a stream and the rest
// of the link (spares, the op byte, suspend) is the same as over sockets.
//
// The stream outlives either end's session: the host reconnects after a
// restart, and a restored guest finds a new host. So every session starts
// with a handshake that skips whatever an earlier session left in flight:
// the host repeats syncMark until the agent answers ackMark, then sends
// goMark once; each end starts yamux right after the other's last mark.
var (
	syncMark = []byte("\x00withruntime-sync\x00")
	ackMark  = []byte("\x00withruntime-ack\x00")
	goMark   = []byte("\x00withruntime-go\x00")
)

// maxSkip bounds what one end reads while looking for a mark.
const maxSkip = 4 << 20

// portConfig is yamux's configuration for both ends: small windows bound
// what the host buffers per stream (256 KiB), and a backlog bounds the
// streams the agent can have waiting. The host's end reads the guest
// through a frameGuard, which bounds the rest.
func portConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = 64
	c.MaxStreamWindowSize = portWindow
	c.LogOutput = io.Discard
	c.ConnectionWriteTimeout = 30 * time.Second
	c.StreamCloseTimeout = 30 * time.Second
	return c
}

// bufConn reads through a buffered reader that may hold bytes read past
// a mark.
type bufConn struct {
	io.ReadWriteCloser
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// keepOpen is the agent's side of bufConn: a session that ends leaves
// the port device open for the next. yamux reports a session closed
// before its reader has returned, so release waits for that read: the
// next handshake must be the port's only reader.
type keepOpen struct {
	*bufConn
	closed atomic.Bool
	mu     sync.Mutex // held by a read in progress
}

func (k *keepOpen) Read(b []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed.Load() {
		return 0, io.ErrClosedPipe
	}
	return k.bufConn.Read(b)
}

func (k *keepOpen) Close() error {
	k.closed.Store(true)
	return nil
}

// release ends the session's reads and waits for one in progress.
func (k *keepOpen) release() {
	k.closed.Store(true)
	k.mu.Lock()
	k.mu.Unlock()
}

// findMark reads until mark and returns what follows it buffered.
func findMark(r *bufio.Reader, mark []byte) error {
	var window []byte
	for n := 0; n < maxSkip; n++ {
		b, err := r.ReadByte()
		if err != nil {
			return err
		}
		window = append(window, b)
		if len(window) > len(mark) {
			window = window[1:]
		}
		if bytes.Equal(window, mark) {
			return nil
		}
	}
	return errors.New("agentlink: no handshake within the bound")
}

// ServePort starts the host's end of a link over c, a connection to a
// microVM's agent port. It returns once the agent answered the handshake.
func ServePort(ctx context.Context, c net.Conn) (*Host, error) {
	acked := make(chan error, 1)
	r := bufio.NewReader(c)
	go func() { acked <- findMark(r, ackMark) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		c.SetWriteDeadline(time.Now().Add(opWriteTimeout))
		if _, err := c.Write(syncMark); err != nil {
			c.Close()
			return nil, fmt.Errorf("agent port: %w", err)
		}
		select {
		case err := <-acked:
			if err == nil {
				_, err = c.Write(goMark)
			}
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("agent port: %w", err)
			}
			c.SetWriteDeadline(time.Time{})
			s, err := yamux.Server(newFrameGuard(&bufConn{ReadWriteCloser: c, r: r}), portConfig())
			if err != nil {
				c.Close()
				return nil, err
			}
			return Serve(streamListener{s}), nil
		case <-tick.C:
		case <-ctx.Done():
			c.Close()
			<-acked
			return nil, fmt.Errorf("waiting for the agent: %w", ctx.Err())
		}
	}
}

// Port is the agent's end of a link over one byte stream.
type Port struct {
	rw io.ReadWriteCloser

	mu      sync.Mutex // guards sess and gen
	sess    *yamux.Session
	gen     uint64
	changed chan struct{} // closed and renewed when sess changes
}

// NewPort makes the agent's end over rw (the opened port device).
func NewPort(rw io.ReadWriteCloser) *Port {
	return &Port{rw: rw, changed: make(chan struct{})}
}

// Run keeps a session up until ctx ends: a session that ends (the host
// went away, or a new host's handshake arrived) is followed by the next.
func (p *Port) Run(ctx context.Context) error {
	r := bufio.NewReader(eofWait{ctx: ctx, r: p.rw})
	for ctx.Err() == nil {
		if err := findMark(r, syncMark); err != nil {
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if _, err := p.rw.Write(ackMark); err != nil {
			continue
		}
		if findMark(r, goMark) != nil {
			continue
		}
		k := &keepOpen{bufConn: &bufConn{ReadWriteCloser: p.rw, r: r}}
		s, err := yamux.Client(k, portConfig())
		if err != nil {
			continue
		}
		p.set(s)
		select {
		case <-s.CloseChan():
		case <-ctx.Done():
			s.Close()
		}
		p.set(nil)
		k.release()
	}
	return ctx.Err()
}

func (p *Port) set(s *yamux.Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sess = s
	if s != nil {
		p.gen++
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// Dial opens a stream to the host on the current session, waiting for
// one.
func (p *Port) Dial(ctx context.Context) (net.Conn, error) {
	for {
		p.mu.Lock()
		s, changed := p.sess, p.changed
		p.mu.Unlock()
		if s != nil {
			st, err := s.OpenStream()
			if err != nil {
				return nil, err
			}
			return closingStream{st}, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// WaitResume returns once a session newer than the current one is up:
// a suspended agent's host comes back on a new session.
func (p *Port) WaitResume(ctx context.Context) error {
	p.mu.Lock()
	gen := p.gen
	p.mu.Unlock()
	for {
		p.mu.Lock()
		now, s, changed := p.gen, p.sess, p.changed
		p.mu.Unlock()
		if now > gen && s != nil {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// eofWait turns the end of file a port reads while no host is connected
// into a wait: the port device reads 0 bytes until a host connects.
type eofWait struct {
	ctx context.Context
	r   io.Reader
}

func (e eofWait) Read(b []byte) (int, error) {
	for {
		n, err := e.r.Read(b)
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		select {
		case <-e.ctx.Done():
			return 0, e.ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// closingStream is a yamux stream whose Close also ends a Read that is
// waiting: yamux lets a stream closed on one end go on reading until the
// other end closes, and the link's ends close spares they wait on.
type closingStream struct{ *yamux.Stream }

func (c closingStream) Close() error {
	c.Stream.SetReadDeadline(time.Now())
	return c.Stream.Close()
}

// streamListener hands out the agent's streams as closingStreams.
type streamListener struct{ *yamux.Session }

func (l streamListener) Accept() (net.Conn, error) {
	st, err := l.Session.AcceptStream()
	if err != nil {
		return nil, err
	}
	return closingStream{st}, nil
}
