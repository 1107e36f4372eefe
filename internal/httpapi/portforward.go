package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/coder/websocket"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// GET /v1/sandboxes/{id}/port-forward/{port}: one TCP connection to the
// sandbox's port, carried by a WebSocket's binary messages both ways
// (withruntime sandbox port-forward opens one per local connection). The
// port is dialed before the WebSocket opens, so that a port with nothing
// listening is the API's JSON error (502 bad_gateway), not a closed
// socket.

// portForwardFrame bounds one message from the client.
const portForwardFrame = 1 << 20

func (s *server) portForward(w http.ResponseWriter, r *http.Request, c caller) error {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || !headerHasToken(r.Header, "Connection", "upgrade") {
		return sandbox.Errorf(sandbox.KindInvalid, "GET .../port-forward/{port} is a WebSocket: send the handshake (Connection: Upgrade, Upgrade: websocket)")
	}
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	ports, err := s.ports()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := s.previews.acquire(c.account, id); err != nil {
		return err
	}
	defer s.previews.release(c.account, id)
	conn, err := ports.DialPort(r.Context(), c.account, id, port)
	if err != nil {
		return err
	}
	tcp := newIdleConn(conn, previewIdle)
	defer tcp.Close()
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		infoFrom(r.Context()).err = err
		return nil
	}
	ws.SetReadLimit(portForwardFrame)
	// The request's context ends with the hijacked connection's handler:
	// the relay's own ends when either side does.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(tcp, nc)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(nc, tcp)
		done <- struct{}{}
	}()
	<-done
	// Either side ended: the other is closed, and its copy ends.
	_ = nc.Close()
	_ = tcp.Close()
	<-done
	return nil
}
