package agentlink

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/backoff"
)

// Agent is the agent's end of the link: it keeps spare connections open to
// the host and serves HTTP on those the host takes.
type Agent struct {
	// Dial opens one connection to the host.
	Dial func(ctx context.Context) (net.Conn, error)
	// Handler serves the host's requests.
	Handler http.Handler
	// WaitResume returns once the sandbox was restored after a suspend.
	WaitResume func(ctx context.Context) error
	// Spares is how many idle connections the agent keeps open; default 4.
	Spares int
	// Suspending, when set, is called as the host asks for a suspend,
	// before running requests get their moment to finish; Resumed once
	// the link is back.
	Suspending, Resumed func()
}

// errSuspended ends a session whose host asked for a suspend.
var errSuspended = errors.New("suspended")

// Run serves until ctx ends: one session after another, separated by a
// suspend and its resume.
func (a *Agent) Run(ctx context.Context) error {
	for {
		if err := a.session(ctx); !errors.Is(err, errSuspended) {
			return err
		}
		if err := a.WaitResume(ctx); err != nil {
			return err
		}
		if a.Resumed != nil {
			a.Resumed()
		}
	}
}

// session serves until the host asks for a suspend (errSuspended, with
// every connection closed) or ctx ends.
func (a *Agent) session(ctx context.Context) error {
	spares := a.Spares
	if spares <= 0 {
		spares = 4
	}
	s := &session{a: a, l: newConnListener(), slots: make(chan struct{}, spares), idle: map[net.Conn]struct{}{}}
	srv := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(s.l)
	}()
	dctx, stopDialing := context.WithCancel(ctx)
	suspend := make(chan net.Conn, 1)
	s.wg.Add(1)
	go s.dial(dctx, suspend)

	var control net.Conn
	select {
	case control = <-suspend:
	case <-ctx.Done():
	}
	stopDialing()
	if control != nil && a.Suspending != nil {
		a.Suspending()
	}
	s.closeIdle()
	s.wg.Wait()
	// Running requests get a moment to finish, then their connections go.
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	srv.Shutdown(sctx)
	cancel()
	srv.Close()
	<-served
	s.l.drain()
	if control == nil {
		return ctx.Err()
	}
	control.Write([]byte{ackSuspended})
	control.Close()
	return errSuspended
}

type session struct {
	a     *Agent
	l     *connListener
	slots chan struct{} // one token per spare being dialed or waiting
	wg    sync.WaitGroup

	mu   sync.Mutex // guards idle
	idle map[net.Conn]struct{}
}

// dial keeps the spares topped up until ctx ends. Failures back off, and
// so do spares the host closes unused (a full host queue, a host restart).
func (s *session) dial(ctx context.Context, suspend chan<- net.Conn) {
	defer s.wg.Done()
	var delay time.Duration
	failed, used := make(chan struct{}, 1), make(chan struct{}, 1)
	for {
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		select {
		case <-failed:
			delay = backoff.Next(delay, 2*time.Millisecond, 100*time.Millisecond)
		case <-used:
			delay = 0
		default:
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			}
		}
		c, err := s.a.Dial(ctx)
		if err != nil {
			<-s.slots
			signal(failed)
			continue
		}
		if !s.addIdle(ctx, c) {
			c.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if s.wait(c, suspend) {
				signal(used)
			} else {
				signal(failed)
			}
		}()
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (s *session) addIdle(ctx context.Context, c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	s.idle[c] = struct{}{}
	return true
}

// wait reads the host's first byte on a spare and acts on it. It reports
// whether the host used the connection.
func (s *session) wait(c net.Conn, suspend chan<- net.Conn) bool {
	var b [1]byte
	_, err := c.Read(b[:])
	s.mu.Lock()
	_, mine := s.idle[c]
	delete(s.idle, c)
	s.mu.Unlock()
	<-s.slots
	if err != nil || !mine {
		c.Close()
		return false
	}
	switch b[0] {
	case opHTTP:
		if !s.l.push(c) {
			c.Close()
		}
		return true
	case opSuspend:
		select {
		case suspend <- c:
		default:
			c.Close() // a suspend is under way already
		}
		return true
	default:
		c.Close()
		return false
	}
}

func (s *session) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.idle {
		c.Close()
	}
	s.idle = map[net.Conn]struct{}{}
}

// connListener hands the connections the host took for HTTP to an
// http.Server.
type connListener struct {
	ch     chan net.Conn
	mu     sync.Mutex // guards closed
	closed bool
	done   chan struct{}
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn, 64), done: make(chan struct{})}
}

func (l *connListener) push(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	select {
	case l.ch <- c:
		return true
	default:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	return nil
}

// drain closes what was handed over but never accepted.
func (l *connListener) drain() {
	l.Close()
	for {
		select {
		case c := <-l.ch:
			c.Close()
		default:
			return
		}
	}
}

func (l *connListener) Addr() net.Addr { return linkAddr{} }

type linkAddr struct{}

func (linkAddr) Network() string { return "agentlink" }
func (linkAddr) String() string  { return "host" }
