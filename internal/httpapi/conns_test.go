package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/store"
)

// limitedServer serves the API of e again, on a loopback listener with
// lim, wired as the real server wires it.
func limitedServer(t *testing.T, e *testEnv, lim ConnLimits, mod func(*Config)) (string, *Listener) {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim.Logger = slog.New(slog.NewJSONHandler(e.logs, nil))
	l := Listen(nl, lim)
	cfg := Config{Sandboxes: e.fake, Store: e.store, Secrets: e.vault, Logger: lim.Logger}
	if mod != nil {
		mod(&cfg)
	}
	srv := l.HTTPServer(NewServer(cfg))
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return nl.Addr().String(), l
}

// openConns is how many connections l holds.
func (l *Listener) openConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// eventually waits (generously) for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
	}
}

// slowClient connects and sends part of a request line; the Listener
// has admitted it when it returns.
func slowClient(t *testing.T, addr string, l *Listener) net.Conn {
	t.Helper()
	before := l.openConns()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /v1/heal"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the connection is admitted", func() bool { return l.openConns() > before || l.openConns() == l.max })
	return c
}

// closedByServer reports whether the server closed c: a read then ends
// at once with EOF or a reset, where an open connection runs into the
// deadline.
func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// stillOpen reports whether c stays open for a moment.
func stillOpen(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// health asks for /v1/health on a connection of its own and keeps it
// open, idle, after the answer.
func health(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: got %d, want 200", resp.StatusCode)
	}
	return c
}

func TestListenerEvictsLongestWaiting(t *testing.T) {
	tests := []struct {
		name string
		// open opens three connections in order and names the one a
		// fourth must evict.
		open func(t *testing.T, addr string, l *Listener) (victim net.Conn, others []net.Conn)
	}{
		{"the oldest of slow clients", func(t *testing.T, addr string, l *Listener) (net.Conn, []net.Conn) {
			a := slowClient(t, addr, l)
			b := slowClient(t, addr, l)
			c := slowClient(t, addr, l)
			return a, []net.Conn{b, c}
		}},
		{"an idle connection before newer slow clients", func(t *testing.T, addr string, l *Listener) (net.Conn, []net.Conn) {
			a := health(t, addr)
			eventually(t, "the first is idle", func() bool { return l.openConns() == 1 })
			b := slowClient(t, addr, l)
			c := slowClient(t, addr, l)
			return a, []net.Conn{b, c}
		}},
		{"a slow client before a connection that went idle later", func(t *testing.T, addr string, l *Listener) (net.Conn, []net.Conn) {
			a := slowClient(t, addr, l)
			b := health(t, addr) // accepted after a, idle after a
			eventually(t, "two are open", func() bool { return l.openConns() == 2 })
			c := slowClient(t, addr, l)
			return a, []net.Conn{b, c}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			addr, l := limitedServer(t, e, ConnLimits{MaxConns: 3}, nil)
			victim, others := tt.open(t, addr, l)
			if got := l.openConns(); got != 3 {
				t.Fatalf("open connections: got %d, want 3", got)
			}
			health(t, addr) // the fourth, answered
			if !closedByServer(victim) {
				t.Error("the longest-waiting connection is still open, want it evicted")
			}
			for i, c := range others {
				if !stillOpen(c) {
					t.Errorf("connection %d was closed, want it open", i+2)
				}
			}
			if got := l.openConns(); got > 3 {
				t.Errorf("open connections: got %d, want at most 3", got)
			}
			if !strings.Contains(e.logs.String(), "shedding API connections") {
				t.Errorf("no log line about shed connections in:\n%s", e.logs)
			}
		})
	}
}

// execInProgress starts an exec with key over a connection of its own and
// returns once its start event is in, with what reads the rest.
func execInProgress(t *testing.T, addr, key string) (rest func() (string, error)) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	body := `{"cmd":["true"]}`
	req := "POST /v1/sandboxes/sbx-1/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("exec: got %d, want 200", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.Contains(first, `"start"`) {
		t.Fatalf("exec's first line: got %q (%v), want the start event", first, err)
	}
	return func() (string, error) {
		b, err := io.ReadAll(br)
		return string(b), err
	}
}

func TestListenerNeverEvictsRequestsInProgress(t *testing.T) {
	e := newEnv(t, nil)
	gate := make(chan struct{})
	e.agent.mu.Lock()
	e.agent.execGate = gate
	e.agent.mu.Unlock()
	addr, l := limitedServer(t, e, ConnLimits{MaxConns: 2}, nil)
	key := e.keys[store.KeyFull]

	first := execInProgress(t, addr, key)
	slow := slowClient(t, addr, l)
	// Full: a newcomer evicts the slow client, not the exec.
	newcomer := slowClient(t, addr, l)
	if !closedByServer(slow) {
		t.Fatal("the slow client is still open, want it evicted")
	}
	// The newcomer, now waiting longest, makes room for a second exec.
	second := execInProgress(t, addr, key)
	if !closedByServer(newcomer) {
		t.Fatal("the newcomer is still open, want it evicted for the exec")
	}
	// Every slot has a request in progress: a new connection is refused.
	refused, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	io.WriteString(refused, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	if !closedByServer(refused) {
		t.Fatal("a connection beyond the limit was served while every slot had a request in progress")
	}
	close(gate)
	for i, rest := range []func() (string, error){first, second} {
		out, err := rest()
		if err != nil || !strings.Contains(out, `"exit_code":0`) {
			t.Errorf("exec %d: got %q (%v), want the rest of the stream through its exit", i+1, out, err)
		}
	}
	health(t, addr)
}

func TestListenerEvictsKeylessRequests(t *testing.T) {
	// A keyless request whose body dribbles in (POST /v1/trial) must not
	// pin a slot the way a key holder's request does.
	e := newEnv(t, nil)
	addr, l := limitedServer(t, e, ConnLimits{MaxConns: 1}, func(c *Config) { c.Trial.Enabled = true })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /v1/trial HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	eventually(t, "the trial handler reads the body", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		front := l.waiting.Front()
		return front != nil && !front.Value.(*conn).reading.Load()
	})
	health(t, addr)
	if !closedByServer(c) {
		t.Error("the keyless request is still open, want it evicted")
	}
}

func TestHeaderTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	addr, _ := limitedServer(t, e, ConnLimits{}, nil)
	tests := []struct {
		name       string
		pad        int
		wantStatus int
	}{
		{"small", 1 << 10, http.StatusOK},
		{"just under the bound", DefaultMaxHeaderBytes - 5<<10, http.StatusOK},
		{"just over the bound", DefaultMaxHeaderBytes + 1, http.StatusRequestHeaderFieldsTooLarge},
		{"over 1 MiB", 2 << 20, http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://"+addr+"/v1/health", nil)
			req.Header.Set("X-Pad", strings.Repeat("x", tt.pad))
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status: got %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusOK {
				return
			}
			d := errorOf(t, resp)
			if d.Code != "payload_too_large" || !strings.Contains(d.Message, "headers") {
				t.Errorf("error: got %+v, want payload_too_large about headers", d)
			}
		})
	}
	// A body is not a header: a large one within the body bound passes.
	body := `{"cmd":["true"],"env":{"A":"` + strings.Repeat("y", 200<<10) + `"}}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://"+addr+"/v1/sandboxes/sbx-1/exec", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.keys[store.KeyFull])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b api.ErrorBody
		json.NewDecoder(resp.Body).Decode(&b)
		t.Fatalf("a large body: got %d %+v, want 200", resp.StatusCode, b)
	}
}

func TestHeaderEnd(t *testing.T) {
	tests := []struct {
		name  string
		reads []string
		want  bool
	}{
		{"CRLF in one read", []string{"GET / HTTP/1.1\r\nHost: x\r\n\r\n"}, true},
		{"bare newlines", []string{"GET / HTTP/1.1\nHost: x\n\n"}, true},
		{"split across reads", []string{"GET / HTTP/1.1\r\nHost: x\r", "\n", "\r", "\n"}, true},
		{"split after the first newline", []string{"GET / HTTP/1.1\r\nHost: x\r\n", "\r\nbody"}, true},
		{"a line still coming", []string{"GET / HTTP/1.1\r\nHost: x\r\n", "X-Slow: a", "a"}, false},
		{"no line yet", []string{"GET /v1/heal"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tail [2]byte
			got := false
			for _, r := range tt.reads {
				var end bool
				end, tail = headerEnd(tail, []byte(r))
				got = got || end
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestListenerSparesDeliveredHeaders(t *testing.T) {
	// No http.Server here: the accepted connections are never read unless
	// the test reads them, as when the server is too busy to get to them.
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(nl, ConnLimits{MaxConns: 3})
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func(send string) (client, server net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", nl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, send)
		select {
		case s := <-accepted:
			t.Cleanup(func() { s.Close() })
			return c, s
		case <-time.After(10 * time.Second):
			t.Fatal("not accepted")
		}
		return nil, nil
	}
	const whole = "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
	slow1, _ := dial("GET /v1/heal")
	unread, unreadSrv := dial(whole) // delivered, still in the kernel
	readIn, readInSrv := dial(whole) // delivered, read by the server
	slow2, _ := dial("GET /v1/heal") // evicts slow1: it waited longest
	eventually(t, "the kernel has the whole request", func() bool {
		return peek(unreadSrv.(*conn).Conn, make([]byte, 64)) == len(whole)
	})
	if _, err := io.ReadFull(readInSrv, make([]byte, len(whole))); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(slow1) {
		t.Fatal("the first slow client is still open, want it evicted")
	}
	// Full with unread, readIn and slow2: a newcomer must evict slow2, the
	// only one that has not delivered its headers, though it came last.
	newcomer, newcomerSrv := dial("GET /v1/heal")
	if !closedByServer(slow2) {
		t.Error("the slow client is still open, want it evicted")
	}
	for name, c := range map[string]net.Conn{"unread": unread, "read": readIn, "newcomer": newcomer} {
		if !stillOpen(c) {
			t.Errorf("the %s connection was closed, want it open", name)
		}
	}
	// The newcomer delivers too: with no one left to evict, the next
	// connection is refused.
	io.WriteString(newcomer, whole[len("GET /v1/heal"):])
	eventually(t, "the kernel has the newcomer's request", func() bool {
		return peek(newcomerSrv.(*conn).Conn, make([]byte, 64)) == len(whole)
	})
	refused, err := net.Dial("tcp", nl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	if !closedByServer(refused) {
		t.Error("a connection beyond the limit was admitted while every other had delivered its headers")
	}
	for name, c := range map[string]net.Conn{"unread": unread, "read": readIn, "newcomer": newcomer} {
		if !stillOpen(c) {
			t.Errorf("the %s connection was closed, want it open", name)
		}
	}
}
