package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/store"
)

// A browser sends its key as a subprotocol (it cannot set Authorization
// on a WebSocket): the terminal opens with it, the server selects the
// plain subprotocol and never echoes the key, and nothing else takes a key
// that way.
func TestPtyKeyAsSubprotocol(t *testing.T) {
	e := newPtyEnv(t)
	wsURL := "ws" + strings.TrimPrefix(e.url, "http") + "/v1/sandboxes/sbx-1/pty?cmd=sh"
	dial := func(protos ...string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		return websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: protos})
	}

	t.Run("opens with the key offered", func(t *testing.T) {
		conn, resp, err := dial(api.PtySubprotocol, api.PtyBearerPrefix+e.keys[store.KeyFull])
		if err != nil {
			t.Fatalf("dialing: %v (answer %+v)", err, resp)
		}
		defer conn.CloseNow()
		if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != api.PtySubprotocol {
			t.Fatalf("the server selected %q, want %q", got, api.PtySubprotocol)
		}
		c := &ptyClient{t: t, conn: conn}
		c.send("echo sub-$((20+1))\n")
		c.until("sub-21")
	})

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			protos []string
			status int
		}{
			{"no subprotocol of its own", []string{api.PtyBearerPrefix + e.keys[store.KeyFull]}, http.StatusUnauthorized},
			{"unknown key", []string{api.PtySubprotocol, api.PtyBearerPrefix + "wr_nope"}, http.StatusUnauthorized},
			{"empty key", []string{api.PtySubprotocol, api.PtyBearerPrefix}, http.StatusUnauthorized},
			{"two keys", []string{api.PtySubprotocol, api.PtyBearerPrefix + e.keys[store.KeyFull], api.PtyBearerPrefix + e.keys[store.KeyReadOnly]}, http.StatusUnauthorized},
			{"read-only key", []string{api.PtySubprotocol, api.PtyBearerPrefix + e.keys[store.KeyReadOnly]}, http.StatusForbidden},
			{"no key", []string{api.PtySubprotocol}, http.StatusUnauthorized},
		} {
			conn, resp, err := dial(tc.protos...)
			if err == nil {
				conn.CloseNow()
				t.Fatalf("%s: the WebSocket opened", tc.name)
			}
			if resp == nil || resp.StatusCode != tc.status {
				t.Fatalf("%s: got %+v, want status %d", tc.name, resp, tc.status)
			}
		}
	})

	t.Run("other routes take no key that way", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.url+"/v1/sandboxes", nil)
		req.Header.Set("Sec-WebSocket-Protocol", api.PtySubprotocol+", "+api.PtyBearerPrefix+e.keys[store.KeyFull])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /v1/sandboxes with the key as a subprotocol: %d, want 401", resp.StatusCode)
		}
	})
}
