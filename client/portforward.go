package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"

	"github.com/coder/websocket"
)

// DialPort opens a TCP connection to port on the loopback address of
// sandbox id (127.0.0.1 inside it: a database, a debugger, a server bound
// to no other address), carried by the API's port-forward WebSocket
// (GET /v1/sandboxes/{id}/port-forward/{port}, a key that may write to the
// sandbox): one WebSocket per connection, the TCP bytes in its binary
// messages both ways. It needs no route into the sandbox's network.
//
// ctx bounds the dial only, as net.Dialer.DialContext's does: once
// connected, the connection lasts until either side closes it. What the
// server refuses before connecting (no such sandbox, a paused one, nothing
// listening on port: code unavailable) is an *APIError. Closing the
// connection closes the sandbox's side too; there is no half-close.
func (c *Client) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	if err := checkPort(port); err != nil {
		return nil, err
	}
	path, err := sandboxPath(id, "/port-forward/"+strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	op := "GET " + c.baseURL + path
	h := http.Header{"User-Agent": {c.userAgent}}
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	// The client's own HTTP client dials, so that WithHTTPClient's
	// transport and WithListenerOwner's check apply to the WebSocket too.
	ws, resp, err := websocket.Dial(ctx, c.baseURL+path, &websocket.DialOptions{HTTPClient: c.httpClient, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil {
			// Refused before the upgrade: the API's usual JSON error.
			defer resp.Body.Close()
			return nil, readAPIError(resp)
		}
		if ctx.Err() != nil {
			return nil, transportError(ctx, op, err)
		}
		var ae *APIError
		if errors.As(err, &ae) {
			return nil, ae
		}
		return nil, &TransportError{Op: op, Err: err}
	}
	// The connection outlives ctx (see above): only Close ends it.
	return portConn{websocket.NetConn(context.WithoutCancel(ctx), ws, websocket.MessageBinary)}, nil
}

// portFrame bounds one binary message DialPort sends: a WebSocket server
// bounds what it reads in one message (32 KiB is coder/websocket's
// default), so a large Write goes out as several messages, which the
// byte stream does not tell apart.
const portFrame = 32 << 10

// portConn is a port-forward connection whose writes go out in messages
// of at most portFrame bytes.
type portConn struct{ net.Conn }

func (c portConn) Write(p []byte) (int, error) {
	sent := 0
	for sent < len(p) {
		n, err := c.Conn.Write(p[sent:min(len(p), sent+portFrame)])
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}
