package agentlink

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// Bounds one flooding guest may make the host's end of its port hold,
// measured from before ServePort to the end of the flood: the session's
// goroutines and the test's own guest double, and heap plus stacks.
const (
	floodGoroutines = 24
	floodBytes      = 8 << 20
)

// TestPortFloods is root in a microVM's guest that took the agent's port:
// it answers the host's handshake, then writes yamux frames into the
// host's session as fast as it can (the guest side is a test double over
// net.Pipe, standing in for the virtio-serial port; the host side is the
// real ServePort). Whatever it writes, the host holds at most the bounds
// above, and its session either still serves a real agent afterwards or is
// closed.
func TestPortFloods(t *testing.T) {
	const n = 300_000
	var (
		syn    = uint16(1)
		ack    = uint16(2)
		rst    = uint16(8)
		window = uint8(1)
		ping   = uint8(2)
	)
	tests := []struct {
		name string
		// drain: the guest reads what the host writes (else it never does)
		drain bool
		flood func(w *frameWriter)
		// after runs once the host's usage was sampled
		after func(w *frameWriter)
		// closed: the host must end the session; else it must still serve
		closed bool
		// maxPongs bounds the ping answers the guest may see (drain only)
		maxPongs int
	}{
		{name: "pings, never reading the answers", flood: func(w *frameWriter) {
			for i := range n {
				w.frame(ping, syn, 0, uint32(i))
			}
		}},
		{name: "pings, reading the answers", drain: true, maxPongs: 200, flood: func(w *frameWriter) {
			for i := range n {
				w.frame(ping, syn, 0, uint32(i))
			}
		}},
		{name: "window updates on an open stream", drain: true, flood: func(w *frameWriter) {
			w.frame(window, syn, 1, 0)
			for range n {
				w.frame(window, 0, 1, 0)
			}
		}, after: func(w *frameWriter) { w.frame(window, rst, 1, 0) }},
		{name: "window update past the stream's window", drain: true, closed: true, flood: func(w *frameWriter) {
			w.frame(window, syn, 1, 0)
			for range n {
				w.frame(window, 0, 1, 1<<30)
			}
		}},
		{name: "stream opens, never closed", drain: true, closed: true, flood: func(w *frameWriter) {
			for i := range n {
				w.frame(window, syn, uint32(2*i+1), 0)
			}
		}},
		{name: "stream opens up to the bound, never closed", drain: true, flood: func(w *frameWriter) {
			for i := range maxPortStreams {
				w.frame(window, syn, uint32(2*i+1), 0)
			}
		}, after: func(w *frameWriter) {
			for i := range maxPortStreams {
				w.frame(window, rst, uint32(2*i+1), 0)
			}
		}},
		{name: "stream opens, each reset", drain: true, flood: func(w *frameWriter) {
			for i := range n {
				w.frame(window, syn, uint32(2*i+1), 0)
				w.frame(window, rst, uint32(2*i+1), 0)
			}
		}},
		{name: "full windows of data on spares", drain: true, flood: func(w *frameWriter) {
			body := make([]byte, 256<<10)
			for i := range 200 {
				w.data(syn, uint32(2*i+1), body)
			}
		}, after: func(w *frameWriter) {
			for i := range 200 {
				w.frame(window, rst, uint32(2*i+1), 0)
			}
		}},
		{name: "unknown frame type", drain: true, closed: true, flood: func(w *frameWriter) {
			for range n {
				w.frame(9, ack, 0, 0)
			}
		}},
		{name: "pings of another version", drain: true, closed: true, flood: func(w *frameWriter) {
			for range n {
				w.raw([]byte{1, ping, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			base := sample()
			t.Cleanup(func() { settle(t, base.goroutines) }) // last: after the agent's

			hostEnd, guestEnd := net.Pipe()
			defer guestEnd.Close()
			g := &guestDouble{c: guestEnd, r: bufio.NewReader(guestEnd)}
			hs := make(chan error, 1)
			go func() { hs <- g.handshake() }()
			h, err := ServePort(ctx, hostEnd)
			if err != nil {
				t.Fatalf("ServePort: %v", err)
			}
			defer h.Close()
			if err := <-hs; err != nil {
				t.Fatalf("guest handshake: %v", err)
			}
			ended := make(chan struct{})
			pongs := make(chan int, 1)
			if tc.drain {
				go func() {
					defer close(ended)
					pongs <- g.drain()
				}()
			}

			start := time.Now()
			w := &frameWriter{w: bufio.NewWriterSize(guestEnd, 64<<10)}
			tc.flood(w)
			w.w.Flush()
			time.Sleep(200 * time.Millisecond) // what the host read, handled
			peak := sample()
			dg, db := peak.goroutines-base.goroutines, int64(peak.bytes)-int64(base.bytes)
			t.Logf("%d bytes in %v: +%d goroutines, %+.1f MiB heap and stacks",
				w.n, time.Since(start).Round(time.Millisecond), dg, float64(db)/(1<<20))
			if dg > floodGoroutines {
				t.Errorf("the host's goroutines grew by %d, want at most %d", dg, floodGoroutines)
			}
			if db > floodBytes {
				t.Errorf("the host's heap and stacks grew by %.1f MiB, want at most %d MiB", float64(db)/(1<<20), floodBytes>>20)
			}

			if tc.after != nil {
				tc.after(w)
				w.w.Flush()
			}
			if tc.closed {
				guestEnd.SetReadDeadline(time.Now().Add(5 * time.Second))
				select {
				case <-ended:
				case <-time.After(5 * time.Second):
					t.Fatalf("the host kept the session open")
				}
				return
			}
			if tc.drain {
				guestEnd.SetReadDeadline(time.Now()) // stop draining
				<-ended
				guestEnd.SetReadDeadline(time.Time{})
				if got := <-pongs; tc.maxPongs > 0 && got > tc.maxPongs {
					t.Errorf("got %d ping answers in %v, want at most %d", got, time.Since(start).Round(time.Millisecond), tc.maxPongs)
				}
			}
			g.serveAgent(ctx, t)
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			defer rcancel()
			if err := h.Ready(rctx); err != nil {
				t.Fatalf("a real agent after the flood: %v", err)
			}
		})
	}
}

// settle waits for the goroutines a case left to end, so that the next
// case starts from its own baseline.
func settle(t *testing.T, n int) {
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > n+2; {
		if time.Now().After(deadline) {
			t.Logf("%d goroutines still running, %d before", runtime.NumGoroutine(), n)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type usage struct {
	goroutines int
	bytes      uint64 // heap in use and goroutine stacks
}

func sample() usage {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return usage{goroutines: runtime.NumGoroutine(), bytes: m.HeapInuse + m.StackInuse}
}

// guestDouble is the guest's end of the port, played by the test.
type guestDouble struct {
	c net.Conn
	r *bufio.Reader
}

func (g *guestDouble) handshake() error {
	if err := findMark(g.r, syncMark); err != nil {
		return err
	}
	if _, err := g.c.Write(ackMark); err != nil {
		return err
	}
	return findMark(g.r, goMark)
}

// drain reads the host's frames until the port fails and counts the ping
// answers among them.
func (g *guestDouble) drain() int {
	pongs := 0
	hdr := make([]byte, 12)
	for {
		if _, err := io.ReadFull(g.r, hdr); err != nil {
			return pongs
		}
		if hdr[1] == 2 && binary.BigEndian.Uint16(hdr[2:])&2 != 0 {
			pongs++
		}
		if hdr[1] == 0 {
			if _, err := io.CopyN(io.Discard, g.r, int64(binary.BigEndian.Uint32(hdr[8:]))); err != nil {
				return pongs
			}
		}
	}
}

// serveAgent runs a real agent over a fresh yamux client on the port.
func (g *guestDouble) serveAgent(ctx context.Context, t *testing.T) {
	s, err := yamux.Client(&keepOpen{bufConn: &bufConn{ReadWriteCloser: g.c, r: g.r}}, portConfig())
	if err != nil {
		t.Fatalf("guest session: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	agent := &Agent{
		Dial: func(context.Context) (net.Conn, error) {
			st, err := s.OpenStream()
			if err != nil {
				return nil, err
			}
			return closingStream{st}, nil
		},
		WaitResume: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
		Handler:    http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		agent.Run(actx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// frameWriter writes yamux frames, well formed or not.
type frameWriter struct {
	w   *bufio.Writer
	n   int
	err error
}

func (f *frameWriter) raw(b []byte) {
	if f.err != nil {
		return
	}
	n, err := f.w.Write(b)
	f.n += n
	f.err = err
}

func (f *frameWriter) frame(typ uint8, flags uint16, id, length uint32) {
	var h [12]byte
	h[1] = typ
	binary.BigEndian.PutUint16(h[2:], flags)
	binary.BigEndian.PutUint32(h[4:], id)
	binary.BigEndian.PutUint32(h[8:], length)
	f.raw(h[:])
}

func (f *frameWriter) data(flags uint16, id uint32, body []byte) {
	f.frame(0, flags, id, uint32(len(body)))
	f.raw(body)
}
