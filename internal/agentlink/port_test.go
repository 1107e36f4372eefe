package agentlink

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestPortSessions serves requests over one stream, then over a second
// host connection after the first host went away mid-stream: the agent
// skips what was in flight and serves the new host.
func TestPortSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hostEnd, guestEnd := net.Pipe()
	sw := &switchRW{c: make(chan net.Conn, 1)}
	sw.c <- guestEnd
	port := NewPort(sw)
	go port.Run(ctx)
	agent := &Agent{Dial: port.Dial, WaitResume: port.WaitResume, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.URL.Path)
	})}
	go agent.Run(ctx)

	for round := range 2 {
		h, err := ServePort(ctx, hostEnd)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx) }}}
		for i := range 3 {
			resp, err := client.Get("http://agent/x")
			if err != nil {
				t.Fatalf("round %d request %d: %v", round, i, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "hello /x" {
				t.Fatalf("round %d: got %q, want %q", round, b, "hello /x")
			}
		}
		if round == 1 {
			// A suspend over the port: the agent drops every stream,
			// spares it waits on included, and confirms.
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := h.Suspend(sctx)
			cancel()
			if err != nil {
				t.Fatalf("suspend over the port: %v", err)
			}
			break
		}
		// The host goes away with a half-written frame in flight; a new
		// host end takes over the guest's stream.
		hostEnd.Write([]byte{0, 1, 2})
		h.Close()
		hostEnd, guestEnd = net.Pipe()
		sw.c <- guestEnd
	}
}

// switchRW reads and writes the newest connection it was given, as the
// agent's port device does across host connections.
type switchRW struct {
	c   chan net.Conn
	mu  sync.Mutex // guards cur
	cur net.Conn
}

func (s *switchRW) conn() net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case c := <-s.c:
		s.cur = c
	default:
	}
	return s.cur
}

func (s *switchRW) Read(b []byte) (int, error) {
	for {
		n, err := s.conn().Read(b)
		if err == nil || n > 0 {
			return n, nil
		}
		c := <-s.c // the host end closed: wait for the next
		s.mu.Lock()
		s.cur = c
		s.mu.Unlock()
	}
}

func (s *switchRW) Write(b []byte) (int, error) {
	s.mu.Lock()
	c := s.cur
	s.mu.Unlock()
	n, err := c.Write(b)
	if err != nil {
		return len(b), nil // lost, as a port with no host drops it
	}
	return n, nil
}

func (s *switchRW) Close() error { return nil }

// TestPortTraffic sends what an agent really sends through the host's
// frame guard: answers and uploads many windows long, on many streams at
// once. None of it breaks a bound: every request succeeds.
func TestPortTraffic(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	hostEnd, guestEnd := net.Pipe()
	port := NewPort(guestEnd)
	go port.Run(ctx)
	const size = 4 << 20
	agent := &Agent{Dial: port.Dial, WaitResume: port.WaitResume, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Got", strconv.FormatInt(n, 10))
		w.Write(make([]byte, size))
	})}
	go agent.Run(ctx)
	h, err := ServePort(ctx, hostEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	client := &http.Client{Transport: &http.Transport{
		DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx) },
		MaxConnsPerHost: 64,
	}}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/x", bytes.NewReader(make([]byte, size/8)))
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			n, err := io.Copy(io.Discard, resp.Body)
			if err != nil || n != size || resp.Header.Get("X-Got") != strconv.Itoa(size/8) {
				errs <- fmt.Errorf("got %d bytes (%v), the agent got %s; want %d and %d", n, err, resp.Header.Get("X-Got"), size, size/8)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
