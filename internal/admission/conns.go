package admission

import (
	"container/list"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of the API's connections (Listen).
const (
	// DefaultMaxConns is how many client connections the API keeps open at
	// once unless configured otherwise.
	DefaultMaxConns = 4096
	// DefaultMaxHeaderBytes bounds a request's line and headers.
	DefaultMaxHeaderBytes = 64 << 10
	// ReadHeaderTimeout is how long a client has to send a request's line
	// and headers; IdleTimeout is how long a kept-alive connection may wait
	// for its next request.
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 2 * time.Minute
	// DefaultBodyIdleTimeout is how long a request's body may keep the
	// server waiting for its next byte (bodyidle.go).
	DefaultBodyIdleTimeout = 30 * time.Second
	// DefaultWriteIdleTimeout is how long one write of an answer may wait
	// for a client that reads nothing.
	DefaultWriteIdleTimeout = 2 * time.Minute
)

// ConnLimits says what clients may hold of the server.
type ConnLimits struct {
	// MaxConns is how many connections may be open at once
	// (DefaultMaxConns when 0).
	MaxConns int
	// MaxPerAccount is how many connections with a request in progress
	// one account may hold spared from eviction (a quarter of MaxConns
	// when 0; see inprogress.go).
	MaxPerAccount int
	// MaxHeaderBytes bounds a request's line and headers
	// (DefaultMaxHeaderBytes when 0).
	MaxHeaderBytes int
	// BodyIdleTimeout ends a request whose body sends nothing for that
	// long while the server reads it (DefaultBodyIdleTimeout when 0).
	BodyIdleTimeout time.Duration
	// WriteIdleTimeout closes a connection whose client reads nothing of
	// an answer for that long (DefaultWriteIdleTimeout when 0).
	WriteIdleTimeout time.Duration
	// Logger gets a line, at most every shedInterval, on connections shed.
	Logger *slog.Logger
}

// shedInterval spaces the log lines about shed connections, so that a
// flood cannot flood the log too.
const shedInterval = 10 * time.Second

// Listener is the API's listener. It keeps at most MaxConns connections
// open. When a new one arrives and all slots are taken, the connection
// that has waited longest without a request in progress (one still
// sending its request's headers, or idle between requests) is closed to
// make room: a slow client can hold a slot only until newer clients need
// it, and cannot keep anyone out. A connection that has delivered all of
// its request's headers is spared (delivered.go), and so is one whose
// request is in progress: from the moment its key is accepted until its
// handler returns (an exec stream, a file transfer), within the account's
// share and outside a reserve of slots (inprogress.go); past those, the
// request is refused with 429 or 503. Keyless requests (health, trial)
// stay evictable, so no one without a key can pin a slot. A request body
// that stalls ends the request (bodyidle.go), and so does an answer its
// client stops reading (Write).
//
// It also answers a request whose line and headers pass MaxHeaderBytes
// with the API's JSON error, status 431, where net/http would answer
// text/plain. Serve it with the http.Server of HTTPServer.
type Listener struct {
	net.Listener
	max, maxHeader int
	// perAccount bounds an account's spared connections; reserve is how
	// many slots are never spared (inprogress.go).
	perAccount, reserve int
	bodyIdle, writeIdle time.Duration
	tooLarge            []byte // the whole 431 answer
	log                 *slog.Logger

	mu sync.Mutex // guards the fields below but the counters, and the elem, gone, pinned and account fields of every conn
	// open counts the connections accepted and not yet closed.
	open int
	// waiting holds the open connections that may be evicted, the one
	// waiting longest first.
	waiting list.List
	// spared counts the connections spared for a request in progress,
	// byAccount the same by account.
	spared    int
	byAccount map[string]int

	// scratch is where admit peeks at what a connection delivered.
	scratch [16 << 10]byte

	evicted, refused, tooLong, busy atomic.Int64 // since the last log line
	lastLog                         atomic.Int64 // unix nanoseconds
}

// Listen wraps l with the limits.
func Listen(l net.Listener, lim ConnLimits) *Listener {
	if lim.MaxConns <= 0 {
		lim.MaxConns = DefaultMaxConns
	}
	if lim.MaxPerAccount <= 0 {
		lim.MaxPerAccount = defaultPerAccount(lim.MaxConns)
	}
	if lim.MaxHeaderBytes <= 0 {
		lim.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if lim.BodyIdleTimeout <= 0 {
		lim.BodyIdleTimeout = DefaultBodyIdleTimeout
	}
	if lim.WriteIdleTimeout <= 0 {
		lim.WriteIdleTimeout = DefaultWriteIdleTimeout
	}
	if lim.Logger == nil {
		lim.Logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{
		Listener: l, max: lim.MaxConns, maxHeader: lim.MaxHeaderBytes,
		perAccount: lim.MaxPerAccount, reserve: reserveOf(lim.MaxConns), bodyIdle: lim.BodyIdleTimeout, writeIdle: lim.WriteIdleTimeout,
		tooLarge: headerTooLargeAnswer(lim.MaxHeaderBytes), log: lim.Logger,
		byAccount: map[string]int{},
	}
}

// HTTPServer is the http.Server that serves h (the API's handler, or one
// wrapped in Started) on l: with short header and idle timeouts and l's hooks. Serve it with
// Serve(l).
func (l *Listener) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		// net/http's own bound, a buffer above the Listener's, is never met.
		MaxHeaderBytes: l.maxHeader,
		ConnState:      l.connState,
		ConnContext:    l.connContext,
	}
}

// Accept returns the next connection it admits.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.admit(nc); c != nil {
			return c, nil
		}
		nc.Close()
		l.shed(&l.refused)
	}
}

// maxSpared is how many of the longest-waiting connections one admission
// looks at before it gives up: they had delivered their headers, and the
// newcomer is refused rather than one of them evicted.
const maxSpared = 16

// admit tracks nc, evicting the longest-waiting connection that has not
// delivered a request's headers when every slot is taken; nil when it
// finds none to evict.
func (l *Listener) admit(nc net.Conn) *conn {
	l.mu.Lock()
	var victim *conn
	for spared := 0; l.open >= l.max; spared++ {
		front := l.waiting.Front()
		if front == nil || spared == maxSpared {
			l.mu.Unlock()
			return nil
		}
		if c := front.Value.(*conn); c.delivered(l.scratch[:]) {
			l.waiting.MoveToBack(front)
		} else {
			victim = c
			l.forgetLocked(victim)
		}
	}
	c := &conn{Conn: nc, l: l}
	c.reading.Store(true)
	c.elem = l.waiting.PushBack(c)
	l.open++
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
		l.shed(&l.evicted)
	}
	return c
}

// forgetLocked frees c's slot.
func (l *Listener) forgetLocked(c *conn) {
	if c.gone {
		return
	}
	c.gone = true
	l.open--
	l.unspareLocked(c)
	if c.elem != nil {
		l.waiting.Remove(c.elem)
		c.elem = nil
	}
}

// wait makes c evictable again, as the newest of the waiting, and gives
// back its spared connection.
func (l *Listener) wait(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.gone || c.pinned {
		return
	}
	l.unspareLocked(c)
	if c.elem != nil {
		l.waiting.MoveToBack(c.elem)
	} else {
		c.elem = l.waiting.PushBack(c)
	}
}

// pin keeps c from eviction for good: it was taken over.
func (l *Listener) pin(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.pinned = true
	if c.elem != nil {
		l.waiting.Remove(c.elem)
		c.elem = nil
	}
}

// connState is the http.Server's ConnState hook.
func (l *Listener) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	switch st {
	case http.StateIdle:
		// The answer is out; what comes next is the next request's header.
		c.header.Store(0)
		c.tail.Store(0)
		c.ended.Store(false)
		c.reading.Store(true)
		l.wait(c)
	case http.StateHijacked:
		// Whoever took the connection over owns it until it closes.
		l.pin(c)
	}
}

type connKey struct{}

// connContext is the http.Server's ConnContext hook: it lets the handler
// find a request's connection.
func (l *Listener) connContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*conn); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// RequestStarted notes that r's headers are all in: its connection stops
// counting header bytes and, so far a keyless request, becomes the newest
// of the waiting. It returns the request to serve, a copy of r whose body
// is bounded in idle time (watchBody; r itself stays as net/http made it,
// for what it does after the handler), and what ends the request, which
// the handler calls when it returns. A request that came over no
// Listener's connection is served as it is.
func RequestStarted(r *http.Request) (*http.Request, func()) {
	c, _ := r.Context().Value(connKey{}).(*conn)
	if c == nil {
		return r, func() {}
	}
	c.reading.Store(false)
	c.l.wait(c)
	r = r.WithContext(r.Context())
	end := c.watchBody(r)
	return r, func() {
		end()
		c.l.wait(c)
	}
}

// shed counts a shed connection in counter and, at most every
// shedInterval, logs what was shed since the last line.
func (l *Listener) shed(counter *atomic.Int64) {
	counter.Add(1)
	now := time.Now().UnixNano()
	last := l.lastLog.Load()
	if now-last < int64(shedInterval) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn("shedding API connections", "max_conns", l.max,
		"evicted", l.evicted.Swap(0), "refused", l.refused.Swap(0), "header_too_large", l.tooLong.Swap(0),
		"in_progress_refused", l.busy.Swap(0))
}

// conn is a connection the Listener admitted.
type conn struct {
	net.Conn
	l *Listener
	// elem is c's place in l.waiting while it may be evicted; gone is set
	// once its slot is free; pinned once it was hijacked; account is whose
	// request in progress spares it (inprogress.go).
	elem    *list.Element
	gone    bool
	pinned  bool
	account *string

	// reading is set while a request's line and headers are being read,
	// and header counts the bytes read meanwhile. net/http's readahead
	// may add part of a body: up to one buffer (4 KiB), as its own bound.
	reading atomic.Bool
	header  atomic.Int64
	// tail is the last two bytes read meanwhile; ended is set once they
	// held the end of the headers (delivered).
	tail     atomic.Uint32
	ended    atomic.Bool
	answered atomic.Bool // the 431 is out
	// body is the body of the request being served, when it has one.
	body atomic.Pointer[idleBody]
}

func (c *conn) lastTwo() [2]byte {
	t := c.tail.Load()
	return [2]byte{byte(t >> 8), byte(t)}
}

// errHeaderTooLarge ends a connection whose header passed the bound.
var errHeaderTooLarge = errors.New("request header too large")

func (c *conn) Read(p []byte) (int, error) {
	if c.answered.Load() {
		return 0, c.readError()
	}
	n, err := c.Conn.Read(p)
	if n == 0 || !c.reading.Load() {
		return n, err
	}
	if c.header.Add(int64(n)) > int64(c.l.maxHeader) {
		c.answerTooLarge()
		return 0, c.readError()
	}
	if !c.ended.Load() {
		end, tail := headerEnd(c.lastTwo(), p[:n])
		c.tail.Store(uint32(tail[0])<<8 | uint32(tail[1]))
		c.ended.Store(end)
	}
	return n, err
}

// readError is a read error net/http ends the connection on without an
// answer of its own.
func (c *conn) readError() error {
	return &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errHeaderTooLarge}
}

func (c *conn) Write(p []byte) (int, error) {
	if c.answered.Load() {
		return len(p), nil // the connection said its last word
	}
	// An answer may stream for as long as its lease, but a client that
	// stops reading it cannot keep its slot (spared, for a key holder)
	// past its sandbox's end and for good.
	c.Conn.SetWriteDeadline(time.Now().Add(c.l.writeIdle))
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.forgetLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// answerTooLarge sends the JSON 431 and lets the client read it: the
// write side is shut and what the client still sends is dropped for a
// moment, since closing with unread bytes would reset the connection and
// lose the answer.
func (c *conn) answerTooLarge() {
	if !c.answered.CompareAndSwap(false, true) {
		return
	}
	c.l.shed(&c.l.tooLong)
	c.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Conn.Write(c.l.tooLarge); err != nil {
		return
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.Conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	io.Copy(io.Discard, c.Conn)
}
