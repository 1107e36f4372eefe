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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/store"
)

// limitedServer serves the API of e again, on a loopback listener with
// lim, wired as the real server wires it.
func limitedServer(t *testing.T, e *testEnv, lim admission.ConnLimits, mod func(*Config)) (string, *admission.Listener) {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim.Logger = slog.New(slog.NewJSONHandler(e.logs, nil))
	l := admission.Listen(nl, lim)
	cfg := Config{Sandboxes: e.fake, Store: e.store, Secrets: e.vault, Logger: lim.Logger}
	if mod != nil {
		mod(&cfg)
	}
	srv := l.HTTPServer(NewServer(cfg))
	// The server marks a connection idle after its answer is out, so a
	// client can read the answer first: tests wait for the mark.
	hook := srv.ConnState
	srv.ConnState = func(nc net.Conn, st http.ConnState) {
		hook(nc, st)
		if st == http.StateIdle {
			idleMarks(l).Add(1)
		}
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return nl.Addr().String(), l
}

var idleMarksOf sync.Map // *admission.Listener -> *atomic.Int64

// idleMarks counts the times l's server marked a connection idle.
func idleMarks(l *admission.Listener) *atomic.Int64 {
	v, _ := idleMarksOf.LoadOrStore(l, new(atomic.Int64))
	return v.(*atomic.Int64)
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
func slowClient(t *testing.T, addr string, l *admission.Listener) net.Conn {
	t.Helper()
	before := l.Stats().Open
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /v1/heal"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the connection is admitted", func() bool { s := l.Stats(); return s.Open > before || s.Open == s.Max })
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
		open func(t *testing.T, addr string, l *admission.Listener) (victim net.Conn, others []net.Conn)
	}{
		{"the oldest of slow clients", func(t *testing.T, addr string, l *admission.Listener) (net.Conn, []net.Conn) {
			a := slowClient(t, addr, l)
			b := slowClient(t, addr, l)
			c := slowClient(t, addr, l)
			return a, []net.Conn{b, c}
		}},
		{"an idle connection before newer slow clients", func(t *testing.T, addr string, l *admission.Listener) (net.Conn, []net.Conn) {
			a := health(t, addr)
			eventually(t, "the first is idle", func() bool { return idleMarks(l).Load() == 1 })
			b := slowClient(t, addr, l)
			c := slowClient(t, addr, l)
			return a, []net.Conn{b, c}
		}},
		{"a slow client before a connection that went idle later", func(t *testing.T, addr string, l *admission.Listener) (net.Conn, []net.Conn) {
			a := slowClient(t, addr, l)
			b := health(t, addr) // accepted after a, idle after a
			eventually(t, "the second is idle", func() bool { return idleMarks(l).Load() == 1 })
			c := slowClient(t, addr, l)
			return a, []net.Conn{b, c}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			addr, l := limitedServer(t, e, admission.ConnLimits{MaxConns: 3}, nil)
			victim, others := tt.open(t, addr, l)
			if got := l.Stats().Open; got != 3 {
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
			if got := l.Stats().Open; got > 3 {
				t.Errorf("open connections: got %d, want at most 3", got)
			}
			if !strings.Contains(e.logs.String(), "shedding API connections") {
				t.Errorf("no log line about shed connections in:\n%s", e.logs)
			}
		})
	}
}

// execRequest is the raw request of an exec of true in sandbox id.
func execRequest(key, id string) string {
	body := `{"cmd":["true"]}`
	return "POST /v1/sandboxes/" + id + "/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// sendRaw sends req over a connection of its own and reads the answer's
// head.
func sendRaw(t *testing.T, addr, req string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return c, resp
}

// execInProgress starts an exec with key in sandbox id over a connection
// of its own and returns once its start event is in, with what reads the
// rest.
func execInProgress(t *testing.T, addr, key, id string) (rest func() (string, error)) {
	t.Helper()
	_, resp := sendRaw(t, addr, execRequest(key, id))
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("exec: got %d %s, want 200", resp.StatusCode, b)
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

// gateExecs holds every exec of e's agent after its start event until
// the returned function runs.
func gateExecs(t *testing.T, e *testEnv) (release func()) {
	gate := make(chan struct{})
	e.agent.mu.Lock()
	e.agent.execGate = gate
	e.agent.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return release
}

// finish reads the rest of exec streams, each through its exit.
func finish(t *testing.T, streams ...func() (string, error)) {
	t.Helper()
	for i, rest := range streams {
		out, err := rest()
		if err != nil || !strings.Contains(out, `"exit_code":0`) {
			t.Errorf("exec %d: got %q (%v), want the rest of the stream through its exit", i+1, out, err)
		}
	}
}

// sparedConns is how many connections l spares for requests in progress, in
// all and of account.
func sparedConns(l *admission.Listener, account string) (all, ofAccount int) {
	s := l.Stats()
	return s.Spared, s.ByAccount[account]
}

func TestListenerNeverEvictsRequestsInProgress(t *testing.T) {
	e := newEnv(t, nil)
	release := gateExecs(t, e)
	addr, l := limitedServer(t, e, admission.ConnLimits{MaxConns: 3, MaxPerAccount: 3}, nil)
	key := e.keys[store.KeyFull]

	first := execInProgress(t, addr, key, "sbx-1")
	slow := slowClient(t, addr, l)
	// The slots are full: a newcomer evicts the slow client, not the exec.
	newcomer := slowClient(t, addr, l)
	second := slowClient(t, addr, l)
	if !closedByServer(slow) {
		t.Fatal("the slow client is still open, want it evicted")
	}
	// The newcomer, now waiting longest, makes room for a second exec.
	third := execInProgress(t, addr, key, "sbx-1")
	if !closedByServer(newcomer) {
		t.Fatal("the newcomer is still open, want it evicted for the exec")
	}
	// Two execs in progress and the reserve's slot: health evicts the
	// last slow client, as anyone without a request in progress.
	health(t, addr)
	if !closedByServer(second) {
		t.Error("the second slow client is still open, want it evicted for health")
	}
	release()
	finish(t, first, third)
	health(t, addr)
}

func TestListenerCapsRequestsInProgress(t *testing.T) {
	tests := []struct {
		name        string
		lim         admission.ConnLimits
		held        int    // acct1's execs in progress, all spared
		wantStatus  int    // of the next exec, acct1's or the admin's
		wantCode    string // its error
		byOtherAcct bool   // the next exec is the admin account's
		wantMessage string
	}{
		{"one account's share", admission.ConnLimits{MaxConns: 8, MaxPerAccount: 2}, 2,
			http.StatusTooManyRequests, "rate_limited", false, "too many requests in progress for this account"},
		{"another account past the first's share", admission.ConnLimits{MaxConns: 8, MaxPerAccount: 2}, 2,
			http.StatusOK, "", true, ""},
		{"the reserve", admission.ConnLimits{MaxConns: 4, MaxPerAccount: 4}, 3,
			http.StatusServiceUnavailable, "capacity_exhausted", true, "too many requests in progress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			release := gateExecs(t, e)
			addr, l := limitedServer(t, e, tt.lim, nil)
			var held []func() (string, error)
			for range tt.held {
				held = append(held, execInProgress(t, addr, e.keys[store.KeyFull], "sbx-1"))
			}
			if all, ofAccount := sparedConns(l, "acct1"); all != tt.held || ofAccount != tt.held {
				t.Fatalf("spared connections: got %d (%d of acct1), want %d", all, ofAccount, tt.held)
			}
			key, id := e.keys[store.KeyFull], "sbx-1"
			if tt.byOtherAcct {
				key, id = e.keys[store.KeyAdmin], "sbx-admin"
			}
			_, resp := sendRaw(t, addr, execRequest(key, id))
			if resp.StatusCode != tt.wantStatus {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("the next exec: got %d %s, want %d", resp.StatusCode, b, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusOK {
				release()
				finish(t, func() (string, error) { b, err := io.ReadAll(resp.Body); return string(b), err })
			} else {
				d := errorOf(t, resp)
				if d.Code != tt.wantCode || !strings.Contains(d.Message, tt.wantMessage) {
					t.Errorf("error: got %+v, want %s saying %q", d, tt.wantCode, tt.wantMessage)
				}
				if got := resp.Header.Get("Retry-After"); got == "" {
					t.Error("no Retry-After on the refusal")
				}
				// Refused, its connection waits like any idle one.
				eventually(t, "the refused request's connection is evictable", func() bool {
					s := l.Stats()
					return s.Waiting == s.Open-tt.held
				})
			}
			// Whatever the key holders hold, a new client finds a slot.
			for range 3 {
				health(t, addr)
			}
			release()
			finish(t, held...)
			eventually(t, "the spared connections are given back", func() bool {
				all, _ := sparedConns(l, "acct1")
				return all == 0
			})
			// Given back, the share is there for a new request.
			next := execInProgress(t, addr, e.keys[store.KeyFull], "sbx-1")
			finish(t, next)
		})
	}
}

func TestListenerEvictsKeylessRequests(t *testing.T) {
	// A keyless request whose body dribbles in (POST /v1/trial) must not
	// pin a slot the way a key holder's request does.
	e := newEnv(t, nil)
	addr, l := limitedServer(t, e, admission.ConnLimits{MaxConns: 1}, func(c *Config) { c.Trial.Enabled = true })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /v1/trial HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	eventually(t, "the trial handler reads the body", func() bool {
		// The one connection waits, evictable, past its headers.
		s := l.Stats()
		return s.Waiting == 1 && s.Reading == 0
	})
	health(t, addr)
	if !closedByServer(c) {
		t.Error("the keyless request is still open, want it evicted")
	}
}

func TestHeaderTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	addr, _ := limitedServer(t, e, admission.ConnLimits{}, nil)
	tests := []struct {
		name       string
		pad        int
		wantStatus int
	}{
		{"small", 1 << 10, http.StatusOK},
		{"just under the bound", admission.DefaultMaxHeaderBytes - 5<<10, http.StatusOK},
		{"just over the bound", admission.DefaultMaxHeaderBytes + 1, http.StatusRequestHeaderFieldsTooLarge},
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

func TestBodyIdleTimeout(t *testing.T) {
	const idle = 2 * time.Second
	// put is a file upload of n bytes whose first sent bytes are sent.
	put := func(n int, sent string) string {
		return "PUT /v1/sandboxes/sbx-1/files?path=a.txt HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer KEY\r\n" +
			"Content-Type: application/octet-stream\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n" + sent
	}
	tests := []struct {
		name string
		req  string
		// then sends the rest of the body, if anything.
		then       func(c net.Conn)
		wantStatus int
	}{
		{"a file upload that stops", put(100, "0123456789"), nil, http.StatusBadRequest},
		{"a JSON body that stops", "POST /v1/sandboxes/sbx-1/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer KEY\r\n" +
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"cmd\":", nil, http.StatusBadRequest},
		{"a file upload that keeps moving, slowly", put(30, ""), func(c net.Conn) {
			// 3 s in all, a byte twenty times as often as the idle bound.
			for range 30 {
				time.Sleep(idle / 20)
				c.Write([]byte("x"))
			}
		}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			addr, l := limitedServer(t, e, admission.ConnLimits{BodyIdleTimeout: idle}, nil)
			req := strings.Replace(tt.req, "KEY", e.keys[store.KeyFull], 1)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, req)
			if tt.then != nil {
				tt.then(c)
			}
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status: got %d %s, want %d", resp.StatusCode, b, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusOK {
				return
			}
			if d := errorOf(t, resp); d.Code != "invalid_request" || !strings.Contains(d.Message, "request body stalled") {
				t.Errorf("error: got %+v, want invalid_request saying the body stalled", d)
			}
			if !closedByServer(c) {
				t.Error("the connection of the stalled body is still open")
			}
			eventually(t, "the slot is free", func() bool { return l.Stats().Open == 0 })
		})
	}
}

func TestBodyIdleTimeoutSparesLongAnswers(t *testing.T) {
	// An exec's body is read at once; its answer may run for the lease.
	const idle = 300 * time.Millisecond
	e := newEnv(t, nil)
	release := gateExecs(t, e)
	addr, _ := limitedServer(t, e, admission.ConnLimits{BodyIdleTimeout: idle}, nil)
	stream := execInProgress(t, addr, e.keys[store.KeyFull], "sbx-1")
	time.Sleep(5 * idle)
	release()
	finish(t, stream)
}

func TestListenerRefusesBeforeTheBody(t *testing.T) {
	// A request refused past the account's share is answered however
	// slowly its body comes: at once when the body is too large for
	// net/http to read the rest before answering, after the idle bound at
	// most when it is not.
	const idle = time.Second
	for _, size := range []int{100, 1 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			e := newEnv(t, nil)
			gateExecs(t, e)
			addr, l := limitedServer(t, e, admission.ConnLimits{MaxConns: 8, MaxPerAccount: 1, BodyIdleTimeout: idle}, nil)
			key := e.keys[store.KeyFull]
			execInProgress(t, addr, key, "sbx-1")
			c, resp := sendRaw(t, addr, "PUT /v1/sandboxes/sbx-1/files?path=a.txt HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+key+
				"\r\nContent-Length: "+strconv.Itoa(size)+"\r\n\r\nx")
			defer resp.Body.Close()
			if d := errorOf(t, resp); resp.StatusCode != http.StatusTooManyRequests || d.Code != "rate_limited" {
				t.Errorf("got %d %+v, want 429 rate_limited", resp.StatusCode, d)
			}
			if !closedByServer(c) {
				t.Error("the refused request's connection is still open, want it closed: its body was never read")
			}
			eventually(t, "its slot is free", func() bool { return l.Stats().Open == 1 })
		})
	}
}

func TestWriteIdleTimeout(t *testing.T) {
	// A key holder whose client stops reading a long answer gives its
	// slot back after the idle bound, where it would hold it for good.
	e := newEnv(t, nil)
	addr, l := limitedServer(t, e, admission.ConnLimits{WriteIdleTimeout: time.Second}, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(c, "GET /v1/sandboxes/sbx-1/files?path=big&size="+strconv.Itoa(256<<20)+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+
		e.keys[store.KeyFull]+"\r\n\r\n")
	eventually(t, "the download to be in progress", func() bool {
		all, _ := sparedConns(l, "acct1")
		return all == 1
	})
	// Nothing is read: the server's writes block, then run into the bound.
	eventually(t, "the slot to be given back", func() bool { return l.Stats().Open == 0 })
	if all, _ := sparedConns(l, "acct1"); all != 0 {
		t.Errorf("spared connections: got %d, want 0", all)
	}
}
