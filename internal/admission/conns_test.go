package admission

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// The Listener's bounds as the API serves them (eviction, spared requests,
// body and write idle time, the 431) are tested in internal/httpapi, over
// the API's own routes; here what needs no API.

// eventually waits (generously) for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
	}
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
