package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/agent"
	"github.com/withruntime/withruntime/internal/store"
)

// newPtyEnv is a test env whose sandbox sbx-1 has a real agent behind it,
// running commands as the test's user.
func newPtyEnv(t *testing.T) *testEnv {
	e := newEnv(t, nil)
	cfg := agent.DefaultConfig()
	cfg.UID, cfg.GID = os.Getuid(), os.Getgid()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace, cfg.Home = ws, ws
	cfg.BaseEnv["HOME"] = ws
	a := agent.New(cfg)
	srv := httptest.NewServer(a)
	t.Cleanup(func() {
		a.Close()
		srv.Close()
	})
	e.fake.mu.Lock()
	e.fake.agentAddr = srv.Listener.Addr().String()
	e.fake.mu.Unlock()
	return e
}

// ptyClient is one WebSocket to a terminal, with what it has read.
type ptyClient struct {
	t    *testing.T
	conn *websocket.Conn
	out  strings.Builder
	msgs []api.PtyMessage
}

func (e *testEnv) dialPty(query string) *ptyClient {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+"/v1/sandboxes/sbx-1/pty?"+query, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + e.keys[store.KeyFull]}},
	})
	if err != nil {
		e.t.Fatalf("dialing ?%s: %v (answer %+v)", query, err, resp)
	}
	e.t.Cleanup(func() { conn.CloseNow() })
	return &ptyClient{t: e.t, conn: conn}
}

// until reads frames until the output contains want (or, with want "",
// until the connection closes); it returns the output so far.
func (c *ptyClient) until(want string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 15*time.Second)
	defer cancel()
	for want == "" || !strings.Contains(c.out.String(), want) {
		typ, b, err := c.conn.Read(ctx)
		if err != nil {
			if want == "" {
				return c.out.String()
			}
			c.t.Fatalf("waiting for %q: %v; got %q", want, err, c.out.String())
		}
		if typ == websocket.MessageBinary {
			c.out.Write(b)
			continue
		}
		var m api.PtyMessage
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("text frame %q: %v", b, err)
		}
		c.msgs = append(c.msgs, m)
	}
	return c.out.String()
}

func (c *ptyClient) send(s string) {
	c.t.Helper()
	if err := c.conn.Write(c.t.Context(), websocket.MessageBinary, []byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *ptyClient) control(m api.PtyMessage) {
	c.t.Helper()
	b, _ := json.Marshal(m)
	if err := c.conn.Write(c.t.Context(), websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *ptyClient) msg(typ string) *api.PtyMessage {
	for i := range c.msgs {
		if c.msgs[i].Type == typ {
			return &c.msgs[i]
		}
	}
	return nil
}

func TestPtyWebSocket(t *testing.T) {
	e := newPtyEnv(t)

	t.Run("size, resize, input, exit code", func(t *testing.T) {
		c := e.dialPty("cmd=sh&cols=100&rows=30&env=FOO=bar")
		c.send("stty size; echo foo=$FOO $TERM\n")
		c.until("foo=bar xterm-256color")
		if !strings.Contains(c.out.String(), "30 100") {
			t.Fatalf("got %q, want the size 30 100", c.out.String())
		}
		c.control(api.PtyMessage{Type: api.PtyMsgResize, Cols: 132, Rows: 43})
		c.send("stty size\n")
		c.until("43 132")
		c.send("exit 7\n")
		c.until("")
		start, exit := c.msg(api.PtyMsgStart), c.msg(api.PtyMsgExit)
		if start == nil || start.PtyID == 0 || exit == nil || exit.ExitCode == nil || *exit.ExitCode != 7 {
			t.Fatalf("got messages %+v, want start with a pty_id and exit 7", c.msgs)
		}
		if c.msgs[len(c.msgs)-1].Type != api.PtyMsgExit {
			t.Fatalf("got messages %+v, want exit last", c.msgs)
		}
	})

	t.Run("reattach replays the kept output", func(t *testing.T) {
		c := e.dialPty("cmd=sh")
		c.send("echo mark-$((40+2))\n")
		c.until("mark-42")
		pid := c.msg(api.PtyMsgStart).PtyID
		c.conn.CloseNow() // a dropped connection: the terminal stays
		c2 := e.dialPty(fmt.Sprintf("pty_id=%d", pid))
		c2.until("mark-42")
		c2.send("sleep 100\n")
		time.Sleep(300 * time.Millisecond)
		c2.send("\x03") // ^C: SIGINT to sleep, the shell prompts again
		c2.send("echo back-$((1+1))\n")
		c2.until("back-2")
		c2.send("exit\n")
		c2.until("")
		if m := c2.msg(api.PtyMsgExit); m == nil || *m.ExitCode != 0 {
			t.Fatalf("got messages %+v, want exit 0", c2.msgs)
		}
	})

	t.Run("a command that cannot start", func(t *testing.T) {
		c := e.dialPty("cmd=no-such-command-here")
		out := c.until("")
		if m := c.msg(api.PtyMsgExit); m == nil || *m.ExitCode != 127 || !strings.Contains(out, "not found") {
			t.Fatalf("got %q and %+v, want not found and exit 127", out, c.msgs)
		}
	})

	t.Run("a plain GET starts nothing", func(t *testing.T) {
		resp := e.do("GET", "/v1/sandboxes/sbx-1/pty?cmd=sh", e.keys[store.KeyFull], nil)
		if d := errorOf(t, resp); resp.StatusCode != http.StatusBadRequest || d.Code != "invalid_request" {
			t.Fatalf("got %d %+v, want 400 invalid_request", resp.StatusCode, d)
		}
		var list api.ProcessList
		resp = e.do("GET", "/v1/sandboxes/sbx-1/processes?running=true&output=false", e.keys[store.KeyFull], nil)
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Processes {
			if p.Pty && len(p.Cmd.Argv) == 1 && p.Cmd.Argv[0] == "sh" && p.Running {
				t.Fatalf("a terminal runs: %+v", list.Processes)
			}
		}
	})

	t.Run("refused before the handshake", func(t *testing.T) {
		for _, tc := range []struct {
			query, key string
			status     int
		}{
			{"cols=0", e.keys[store.KeyFull], http.StatusBadRequest},
			{"rows=abc", e.keys[store.KeyFull], http.StatusBadRequest},
			{"pty_id=1&cmd=sh", e.keys[store.KeyFull], http.StatusBadRequest},
			{"user=admin", e.keys[store.KeyFull], http.StatusBadRequest},
			{"", e.keys[store.KeyReadOnly], http.StatusForbidden},
			{"", "", http.StatusUnauthorized},
			{"pty_id=999999", e.keys[store.KeyFull], http.StatusNotFound},
		} {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			h := http.Header{}
			if tc.key != "" {
				h.Set("Authorization", "Bearer "+tc.key)
			}
			conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+"/v1/sandboxes/sbx-1/pty?"+tc.query, &websocket.DialOptions{HTTPHeader: h})
			cancel()
			if err == nil {
				conn.CloseNow()
				t.Fatalf("?%s: the WebSocket opened", tc.query)
			}
			if resp == nil || resp.StatusCode != tc.status {
				t.Fatalf("?%s: got %+v, want status %d", tc.query, resp, tc.status)
			}
		}
	})
}
