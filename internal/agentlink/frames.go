package agentlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// What a microVM's guest writes into its port reaches the host's yamux
// session only through a frameGuard. Root in the guest can take the port
// from the agent and write any frames, and yamux trusts its peer: it
// answers each ping from a goroutine of its own that waits up to the
// write timeout, and keeps each stream the peer opens, with up to a
// window of data, until both ends closed it. The guard reads the yamux
// framing both ways (it holds no stream data) and keeps what the guest
// can make the host hold bounded:
//
//   - ping requests pass at pingRate after a burst of pingBurst, and only
//     while fewer than maxPingsOut wait for their answer; the rest are
//     dropped (a guest that floods pings only loses its own keepalive);
//   - the guest has at most maxPortStreams streams open on the host; one
//     more ends the session;
//   - data on a stream the host has not written to yet (a spare) or has
//     closed reaches yamux without its payload: nobody on the host would
//     read it, and yamux would hold it for as long as the stream lives;
//   - a window update that grants more than a window, a data frame longer
//     than one, an unknown frame type or version ends the session.
//
// Ending the session breaks only the guest's own link.

// The framing of yamux (its spec.md): a 12-byte header, then for data
// frames length bytes of payload.
const (
	frameHeader = 12

	frameData   = 0
	frameWindow = 1 // length is the window's increase
	framePing   = 2 // length is the ping's id
	frameGoAway = 3 // length is the reason

	flagSYN = 1
	flagACK = 2
	flagFIN = 4
	flagRST = 8
)

// Bounds of one port's session, whatever the guest writes.
const (
	// portWindow is each stream's receive window, both ends.
	portWindow = 256 << 10
	// maxPortStreams bounds the guest's open streams: the host's transport
	// takes at most 256 at once (internal/manager), the link queues 16
	// spares and yamux a backlog of 64.
	maxPortStreams = 512
	// maxPingsOut bounds the guest's pings yamux answers at once: each
	// answer is a goroutine until it is queued.
	maxPingsOut = 4
	pingRate    = 10 // per second
	pingBurst   = 10
)

// errPortProtocol ends a session whose guest broke the framing or a bound.
var errPortProtocol = errors.New("agent port: protocol violation")

// frameGuard wraps the guest's port for the host's yamux session: Read
// filters what the guest wrote, Write watches what the host writes.
type frameGuard struct {
	rw  io.ReadWriteCloser
	now func() time.Time

	// Touched only by yamux's receiving goroutine.
	buf  []byte // what was read from the guest
	pass []byte // what of it was let through
	out  []byte // the part of pass not yet returned
	in   frameCursor
	rerr error

	// Touched only by yamux's sending goroutine.
	sent frameCursor

	mu       sync.Mutex // guards streams and pingsOut
	streams  map[uint32]*guestStream
	pingsOut int
	pings    *rate.Limiter // the guest's ping requests
}

// guestStream is what the guard knows of one stream the guest opened.
type guestStream struct {
	window    int64 // what the host may still send on it
	hostSpoke bool  // the host sent data on it
	hostFIN   bool
	guestFIN  bool
}

// frameCursor follows one direction of the framing.
type frameCursor struct {
	hdr  [frameHeader]byte
	have int    // header bytes read
	body uint32 // payload bytes of the current frame still to come
	drop bool   // whether that payload is dropped
}

func newFrameGuard(rw io.ReadWriteCloser) *frameGuard {
	return &frameGuard{
		rw:      rw,
		now:     time.Now,
		buf:     make([]byte, 32<<10),
		pass:    make([]byte, 0, 32<<10+frameHeader),
		streams: map[uint32]*guestStream{},
		pings:   rate.NewLimiter(pingRate, pingBurst),
	}
}

func (g *frameGuard) Close() error { return g.rw.Close() }

// Read returns the guest's frames that pass, possibly rewritten.
func (g *frameGuard) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if g.rerr != nil {
			return 0, g.rerr
		}
		n, err := g.rw.Read(g.buf)
		g.pass = g.pass[:0]
		if ferr := g.filter(g.buf[:n]); ferr != nil {
			g.rerr = ferr
			return 0, ferr
		}
		g.out, g.rerr = g.pass, err
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

// filter appends to pass what passes of in.
func (g *frameGuard) filter(in []byte) error {
	c := &g.in
	for len(in) > 0 {
		if c.body > 0 {
			k := min(int(c.body), len(in))
			if !c.drop {
				g.pass = append(g.pass, in[:k]...)
			}
			in, c.body = in[k:], c.body-uint32(k)
			continue
		}
		k := copy(c.hdr[c.have:], in)
		in, c.have = in[k:], c.have+k
		if c.have < frameHeader {
			return nil
		}
		c.have = 0
		ok, err := g.received(c)
		if err != nil {
			return err
		}
		if ok {
			g.pass = append(g.pass, c.hdr[:]...)
		}
	}
	return nil
}

// received decides on a header from the guest: whether it passes, and
// (through c) what comes of its payload. It may zero the header's length.
func (g *frameGuard) received(c *frameCursor) (bool, error) {
	h := c.hdr[:]
	typ, flags := h[1], binary.BigEndian.Uint16(h[2:])
	id, length := binary.BigEndian.Uint32(h[4:]), binary.BigEndian.Uint32(h[8:])
	if h[0] != 0 {
		return false, fmt.Errorf("%w: version %d", errPortProtocol, h[0])
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch typ {
	case framePing:
		return flags&flagSYN == 0 || g.allowPing(), nil
	case frameGoAway:
		return true, nil
	case frameData, frameWindow:
	default:
		return false, fmt.Errorf("%w: frame type %d", errPortProtocol, typ)
	}
	if typ == frameData {
		if length > portWindow {
			return false, fmt.Errorf("%w: a data frame of %d bytes", errPortProtocol, length)
		}
		c.body, c.drop = length, false
	}
	s := g.streams[id]
	if flags&flagSYN != 0 {
		// A second SYN for an open stream ends yamux's session.
		if s == nil && len(g.streams) >= maxPortStreams {
			return false, fmt.Errorf("%w: more than %d streams", errPortProtocol, maxPortStreams)
		}
		s = &guestStream{window: portWindow}
		g.streams[id] = s
	}
	if s == nil {
		return true, nil // yamux drops frames of streams it does not have
	}
	switch {
	case typ == frameWindow:
		if s.window += int64(length); s.window > portWindow {
			return false, fmt.Errorf("%w: a window of %d bytes", errPortProtocol, s.window)
		}
	case length > 0 && (!s.hostSpoke || s.hostFIN):
		binary.BigEndian.PutUint32(h[8:], 0)
		c.drop = true
	}
	switch {
	case flags&flagRST != 0:
		delete(g.streams, id)
	case flags&flagFIN != 0:
		s.guestFIN = true
		if s.hostFIN {
			delete(g.streams, id)
		}
	}
	return true, nil
}

// allowPing takes a token for a ping request, unless maxPingsOut are
// unanswered (which takes none). g.mu is held.
func (g *frameGuard) allowPing() bool {
	if g.pingsOut >= maxPingsOut || !g.pings.AllowN(g.now(), 1) {
		return false
	}
	g.pingsOut++
	return true
}

// Write writes what the host's session sends, noting it first: the
// guest may answer as soon as it is written.
func (g *frameGuard) Write(p []byte) (int, error) {
	c := &g.sent
	for b := p; len(b) > 0; {
		if c.body > 0 {
			k := min(int(c.body), len(b))
			b, c.body = b[k:], c.body-uint32(k)
			continue
		}
		k := copy(c.hdr[c.have:], b)
		b, c.have = b[k:], c.have+k
		if c.have == frameHeader {
			c.have = 0
			g.sending(c)
		}
	}
	return g.rw.Write(p)
}

// sending notes a header the host sends.
func (g *frameGuard) sending(c *frameCursor) {
	h := c.hdr[:]
	typ, flags := h[1], binary.BigEndian.Uint16(h[2:])
	id, length := binary.BigEndian.Uint32(h[4:]), binary.BigEndian.Uint32(h[8:])
	if typ == frameData {
		c.body = length
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if typ == framePing {
		if flags&flagACK != 0 && g.pingsOut > 0 {
			g.pingsOut--
		}
		return
	}
	s := g.streams[id]
	if s == nil || (typ != frameData && typ != frameWindow) {
		return
	}
	if typ == frameData && length > 0 {
		s.hostSpoke = true
		s.window -= int64(length)
	}
	switch {
	case flags&flagRST != 0:
		delete(g.streams, id)
	case flags&flagFIN != 0:
		s.hostFIN = true
		if s.guestFIN {
			delete(g.streams, id)
		}
	}
}
