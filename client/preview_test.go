package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/cli/localtrusttest"
)

// The preview calls send what the API's contract says (method, path,
// query, body, key) and return its Preview as it came.
func TestPreviewCalls(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	exp := time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)
	mux := http.NewServeMux()
	record := func(r *http.Request, body string) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			seen = append(seen, "no key")
		}
		seen = append(seen, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+body))
	}
	mux.HandleFunc("GET /v1/sandboxes/{id}/previews/{port}", func(w http.ResponseWriter, r *http.Request) {
		record(r, "")
		writeJSON(w, 200, api.Preview{Port: 8000, Path: "/v1/sandboxes/sbx_a/ports/8000/", Token: "wrpt_t1", ExpiresAt: &exp})
	})
	mux.HandleFunc("PUT /v1/sandboxes/{id}/previews/{port}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		record(r, string(b))
		var req api.SetPreviewRequest
		json.Unmarshal(b, &req)
		p := api.Preview{Port: 3000, Public: req.Public, Path: "/v1/sandboxes/sbx_a/ports/3000/",
			Host: "3000-sbx_a.preview.test:8443", URL: "https://3000-sbx_a.preview.test:8443/"}
		if !req.Public {
			p.Token = "wrpt_t2"
		}
		writeJSON(w, 200, p)
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/previews/revoke", func(w http.ResponseWriter, r *http.Request) {
		record(r, "")
		writeJSON(w, 200, api.PreviewSettings{PublicPorts: []int{3000}})
	})
	c := newTestClient(t, mux)
	ctx := t.Context()

	p, err := c.Preview(ctx, "sbx_a", 8000, 90*time.Minute+time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if p.Token != "wrpt_t1" || p.ExpiresAt == nil || !p.ExpiresAt.Equal(exp) || p.Public {
		t.Errorf("Preview: got %+v", p)
	}
	// Without a host form the URL is the path on the base URL, signed.
	if got, want := c.PreviewURL(p), c.BaseURL()+"/v1/sandboxes/sbx_a/ports/8000/?withruntime_preview_token=wrpt_t1"; got != want {
		t.Errorf("PreviewURL: got %q, want %q", got, want)
	}
	if _, err := c.Preview(ctx, "sbx_a", 8000, 0); err != nil {
		t.Fatal(err)
	}
	pub, err := c.SetPreviewPublic(ctx, "sbx_a", 3000, true)
	if err != nil {
		t.Fatal(err)
	}
	// Public: the host form as it is, no token.
	if got := c.PreviewURL(pub); got != "https://3000-sbx_a.preview.test:8443/" {
		t.Errorf("PreviewURL of a public port: got %q", got)
	}
	priv, err := c.SetPreviewPublic(ctx, "sbx_a", 3000, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PreviewURL(priv); got != "https://3000-sbx_a.preview.test:8443/?withruntime_preview_token=wrpt_t2" {
		t.Errorf("PreviewURL of a private port: got %q", got)
	}
	if err := c.RevokePreviews(ctx, "sbx_a"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		// 90m and a millisecond: whole seconds, rounded up.
		"GET /v1/sandboxes/sbx_a/previews/8000?expires_in=5401",
		"GET /v1/sandboxes/sbx_a/previews/8000",
		`PUT /v1/sandboxes/sbx_a/previews/3000 {"public":true}`,
		`PUT /v1/sandboxes/sbx_a/previews/3000 {"public":false}`,
		"POST /v1/sandboxes/sbx_a/previews/revoke",
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("the server saw:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

// A port no TCP port has is refused before anything is sent; the server's
// refusals come back with their codes.
func TestPreviewRefusals(t *testing.T) {
	sent := false
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		sent = true
		writeError(w, 404, "not_found", "no sandbox sbx_zz")
	})
	c := newTestClient(t, mux)
	for _, port := range []int{0, -1, 65536} {
		if _, err := c.Preview(t.Context(), "sbx_a", port, 0); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("Preview port %d: got %v, want invalid_request", port, err)
		}
		if _, err := c.SetPreviewPublic(t.Context(), "sbx_a", port, true); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("SetPreviewPublic port %d: got %v, want invalid_request", port, err)
		}
		if _, err := c.DialPort(t.Context(), "sbx_a", port); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("DialPort port %d: got %v, want invalid_request", port, err)
		}
	}
	if sent {
		t.Error("a request was sent for a port out of range")
	}
	if err := c.RevokePreviews(t.Context(), "sbx_zz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RevokePreviews: got %v, want not_found", err)
	}
}

// DialPort speaks the port-forward WebSocket: binary messages carry the
// bytes both ways, the key goes in the handshake, a refusal before the
// upgrade is the API's JSON error, and the connection outlives the dial's
// context.
func TestDialPort(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}/port-forward/{port}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			writeError(w, 401, "unauthorized", "no key")
			return
		}
		if r.PathValue("port") != "7000" {
			writeError(w, 502, "unavailable", "nothing listens on port "+r.PathValue("port")+" of sandbox "+r.PathValue("id"))
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		// An echo that upper-cases, message by message, until the client
		// closes.
		ctx := r.Context()
		for {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			if typ != websocket.MessageBinary {
				ws.Close(websocket.StatusUnsupportedData, "binary only")
				return
			}
			if err := ws.Write(ctx, websocket.MessageBinary, bytes.ToUpper(b)); err != nil {
				return
			}
		}
	})
	c := newTestClient(t, mux)

	ctx, cancel := context.WithCancel(t.Context())
	conn, err := c.DialPort(ctx, "sbx_a", 7000)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cancel()                                            // ends the dial's context only
	payload := bytes.Repeat([]byte("abcdefgh"), 64<<10) // 512 KiB, many messages
	go func() { conn.Write(payload) }()
	got := make([]byte, len(payload))
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if !bytes.Equal(got, bytes.ToUpper(payload)) {
		t.Fatal("the echo differs from what was sent")
	}

	_, err = c.DialPort(t.Context(), "sbx_a", 9)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != CodeUnavailable || !strings.Contains(ae.Message, "nothing listens on port 9") {
		t.Errorf("DialPort to a closed port: got %v, want the server's 502 unavailable", err)
	}
	noKey, err := New(WithBaseURL(c.BaseURL()), WithAPIKey(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noKey.DialPort(t.Context(), "sbx_a", 7000); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("DialPort without a key: got %v, want unauthorized", err)
	}
	var te *TransportError
	down, _ := New(WithBaseURL(closedURL(t)), WithAPIKey(testKey))
	if _, err := down.DialPort(t.Context(), "sbx_a", 7000); !errors.As(err, &te) {
		t.Errorf("DialPort to a server that is down: got %v, want a TransportError", err)
	}
}

// DialPort's WebSocket handshake carries the key: with the local daemon's
// admin key it goes, like every other call, only to a listener of the key
// file's owner; another user's listener gets nothing.
func TestDialPortKeepsTheLocalKeyToItsOwner(t *testing.T) {
	l := localtrusttest.Start(t, localtrusttest.Nobody)
	writeLocalKey(t, "wr_local", 0)
	useLocalAddress(t, l.URL)
	c, err := New(WithBaseURL(l.URL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DialPort(t.Context(), "sbx_a", 7000); !errors.Is(err, ErrForbidden) {
		t.Fatalf("DialPort to another user's listener: got %v, want forbidden", err)
	}
	if got := l.Keyed(); len(got) != 0 {
		t.Fatalf("the listener saw keys %q", got)
	}
}
