package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/store"
)

// rawAgent plays an agent that answers every request with answer (which
// may write forever), and keeps the headers it was sent.
type rawAgent struct {
	mu      sync.Mutex
	headers []http.Header
}

func startRawAgent(t *testing.T, answer func(c net.Conn)) (*rawAgent, string) {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nl.Close() })
	a := &rawAgent{}
	go func() {
		for {
			c, err := nl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				a.mu.Lock()
				a.headers = append(a.headers, req.Header.Clone())
				a.mu.Unlock()
				answer(c)
			}()
		}
	}()
	return a, nl.Addr().String()
}

func (a *rawAgent) sent() []http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]http.Header(nil), a.headers...)
}

func TestAgentCannotSwitchProtocols(t *testing.T) {
	const wantMessage = "does not relay"
	switched := func(proto string) func(net.Conn) {
		return func(c net.Conn) {
			fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", proto)
			io.Copy(c, c) // both ways, for as long as the server likes
		}
	}
	tests := []struct {
		name string
		// upgrade is what the client asks for ("": nothing).
		upgrade string
		answer  func(net.Conn)
	}{
		{"101 to a client's upgrade", "websocket", switched("websocket")},
		{"101 unasked", "", switched("h2c")},
		{"endless 102", "", func(c net.Conn) {
			for {
				if _, err := io.WriteString(c, "HTTP/1.1 102 Processing\r\nX-Fake: 1\r\n\r\n"); err != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}},
		{"103 then an answer", "", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n")
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			agent, agentAddr := startRawAgent(t, tt.answer)
			e.fake.mu.Lock()
			e.fake.agentAddr = agentAddr
			e.fake.mu.Unlock()
			addr, l := limitedServer(t, e, admission.ConnLimits{}, nil)
			req := "GET /v1/sandboxes/sbx-1/files/list?path=. HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + e.keys[store.KeyFull] + "\r\n"
			if tt.upgrade != "" {
				req += "Connection: Upgrade\r\nUpgrade: " + tt.upgrade + "\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
			}
			_, resp := sendRaw(t, addr, req+"\r\n")
			defer resp.Body.Close()
			// The first answer the client reads is the final one: no 1xx
			// reaches it.
			if resp.StatusCode != http.StatusInternalServerError {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status: got %d %s, want 500", resp.StatusCode, b)
			}
			if d := errorOf(t, resp); d.Code != "internal" || !strings.Contains(d.Message, wantMessage) {
				t.Errorf("error: got %+v, want internal saying the API %s the agent's status", d, wantMessage)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Error("the answer has no X-Request-Id")
			}
			for _, h := range agent.sent() {
				if h.Get("Upgrade") != "" || strings.Contains(strings.ToLower(h.Get("Connection")), "upgrade") {
					t.Errorf("the agent was asked to upgrade: Upgrade %q, Connection %q", h.Get("Upgrade"), h.Get("Connection"))
				}
			}
			// Nothing was taken over: the client's connection waits like
			// any idle one.
			eventually(t, "every connection is evictable", func() bool {
				s := l.Stats()
				return s.Open == 1 && s.Waiting == 1 && s.Spared == 0
			})
		})
	}
}

func TestAgentIsNotAskedToContinue(t *testing.T) {
	// 100 Continue would be a 1xx from the agent: the API asks none, and
	// a client's Expect is answered by the server itself.
	e := newEnv(t, nil)
	addr, _ := limitedServer(t, e, admission.ConnLimits{}, nil)
	body := strings.Repeat("y", 10<<10)
	req, _ := http.NewRequestWithContext(t.Context(), "PUT", "http://"+addr+"/v1/sandboxes/sbx-1/files?path=a.txt", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.keys[store.KeyFull])
	req.Header.Set("Expect", "100-continue")
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 10 * time.Second}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d, want 200", resp.StatusCode)
	}
	reqs := e.agent.requests()
	last := reqs[len(reqs)-1]
	if last.Header.Get("Expect") != "" || len(last.Body) != len(body) {
		t.Errorf("the agent got Expect %q and %d bytes, want no Expect and %d bytes", last.Header.Get("Expect"), len(last.Body), len(body))
	}
}
