package noderpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Bounds of the client. A node is trusted with its sandboxes, not with the
// API server's memory.
const (
	// MaxResponseBytes bounds a JSON answer (an egress log of 1000 events
	// is well under it).
	MaxResponseBytes = 4 << 20
	// MaxHeaderBytes bounds an answer's headers.
	MaxHeaderBytes = 64 << 10
	dialTimeout    = 5 * time.Second
)

// Client calls the RPC of one node. It is safe for concurrent use; its
// connections (HTTP/2 over mutual TLS) are kept and shared.
type Client struct {
	node string
	base string
	hc   *http.Client
}

// NewClient returns a client of node nodeID at addr (host:port); tc is
// the API server's side of the mutual TLS (clusterpki's ClientTLS).
func NewClient(nodeID, addr string, tc *tls.Config) *Client {
	tc = tc.Clone()
	tc.NextProtos = []string{"h2"}
	t := &http.Transport{
		DialTLSContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			return dialTLS(ctx, network, a, tc)
		},
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: MaxHeaderBytes,
		IdleConnTimeout:        90 * time.Second,
		HTTP2: &http.HTTP2Config{
			// A node that vanished mid-stream is noticed by pings, not
			// only by TCP's timeouts.
			SendPingTimeout: 15 * time.Second,
			PingTimeout:     5 * time.Second,
		},
	}
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP2(true)
	return &Client{node: nodeID, base: "https://" + addr, hc: &http.Client{
		Transport: t,
		// A node never redirects; one that does is not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Node is the id of the node the client calls.
func (c *Client) Node() string { return c.node }

// Close drops the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// dialTLS connects and shakes hands; any failure of either is a dialError:
// no byte of a request has left then.
func dialTLS(ctx context.Context, network, addr string, tc *tls.Config) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 15 * time.Second}
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, &dialError{err}
	}
	conn := tls.Client(raw, tc)
	hctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := conn.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, &dialError{err}
	}
	return conn, nil
}

// dialError is a failure to connect to a node.
type dialError struct{ err error }

func (e *dialError) Error() string { return "connecting: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// transportError is a call that got no answer from the node.
type transportError struct {
	node string
	err  error
}

func (e *transportError) Error() string { return "node " + e.node + ": " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// IsDialError reports whether err is a call that never reached its node
// (the connection or its handshake failed): it is safe to make elsewhere.
func IsDialError(err error) bool {
	var d *dialError
	return errors.As(err, &d)
}

// IsTransportError reports whether err is a call that got no answer from
// its node, dial errors included. A call that is not a dial error may
// have reached the node and done its work.
func IsTransportError(err error) bool {
	var t *transportError
	return errors.As(err, &t)
}

// Health asks the node how it is.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	return &h, c.call(ctx, http.MethodGet, PathHealth, nil, http.StatusOK, &h)
}

// Create asks the node to create a sandbox.
func (c *Client) Create(ctx context.Context, req CreateRequest) (*sandbox.Record, error) {
	var r sandbox.Record
	return &r, c.call(ctx, http.MethodPost, PathCreate, req, http.StatusCreated, &r)
}

// Op runs operation op (OpStop, OpPause...) on sandbox id.
func (c *Client) Op(ctx context.Context, id, op string, req OpRequest) (*sandbox.Record, error) {
	var r sandbox.Record
	return &r, c.call(ctx, http.MethodPost, sandboxPath(PathOp, id, op), req, http.StatusOK, &r)
}

// SetNetwork replaces sandbox id's egress policy.
func (c *Client) SetNetwork(ctx context.Context, id string, req NetworkRequest) (*sandbox.Record, error) {
	var r sandbox.Record
	return &r, c.call(ctx, http.MethodPut, sandboxPath(PathNetwork, id, ""), req, http.StatusOK, &r)
}

// Egress returns sandbox id's egress log.
func (c *Client) Egress(ctx context.Context, account, id string) ([]egress.Event, error) {
	var evs []egress.Event
	p := sandboxPath(PathEgress, id, "") + "?" + url.Values{"account": {account}}.Encode()
	return evs, c.call(ctx, http.MethodGet, p, nil, http.StatusOK, &evs)
}

// Snapshot asks the node for a snapshot of sandbox id.
func (c *Client) Snapshot(ctx context.Context, id string, req SnapshotRequest) (*sandbox.Snapshot, error) {
	var sn sandbox.Snapshot
	return &sn, c.call(ctx, http.MethodPost, sandboxPath(PathSnapshot, id, ""), req, http.StatusCreated, &sn)
}

// Fork asks the node to fork sandbox id.
func (c *Client) Fork(ctx context.Context, id string, req ForkRequest) (*ForkResult, error) {
	var fr ForkResult
	return &fr, c.call(ctx, http.MethodPost, sandboxPath(PathFork, id, ""), req, http.StatusOK, &fr)
}

// DeleteSnapshot asks the node to remove snapshot id of account.
func (c *Client) DeleteSnapshot(ctx context.Context, account, id string) error {
	p := sandboxPath(PathDeleteSnapshot, id, "") + "?" + url.Values{"account": {account}}.Encode()
	return c.call(ctx, http.MethodDelete, p, nil, http.StatusNoContent, nil)
}

// VolumePath is pattern (a PathVolume* constant) for volume name, with
// query q.
func VolumePath(pattern, name string, q url.Values) string {
	return strings.Replace(pattern, "{name}", url.PathEscape(name), 1) + "?" + q.Encode()
}

// Stream sends body (nil: none) to path and returns the answer of status
// want, its body unread, for the caller to stream and close; any other
// status is the node's error.
func (c *Client) Stream(ctx context.Context, method, path string, body io.Reader, want int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &transportError{c.node, err}
	}
	if resp.StatusCode == want {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	return nil, c.answerError(resp.StatusCode, data)
}

// Call is call for callers outside the package: body as JSON (nil:
// none), an answer of status want decoded into out (nil: not read).
func (c *Client) Call(ctx context.Context, method, path string, body any, want int, out any) error {
	return c.call(ctx, method, path, body, want, out)
}

func sandboxPath(pattern, id, op string) string {
	p := strings.Replace(pattern, "{id}", url.PathEscape(id), 1)
	return strings.Replace(p, "{op}", url.PathEscape(op), 1)
}

// call sends body (JSON unless nil) and decodes an answer of status want
// into out.
func (c *Client) call(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &transportError{c.node, err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		// The node answered and then went: what it did is unknown.
		return &transportError{c.node, fmt.Errorf("reading the answer: %w", err)}
	}
	if len(data) > MaxResponseBytes {
		return sandbox.Errorf(sandbox.KindInternal, "node %s answered more than %d bytes", c.node, MaxResponseBytes)
	}
	if resp.StatusCode != want {
		return c.answerError(resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, fmt.Sprintf("node %s answered a body that is not what was asked", c.node))
	}
	return nil
}

// answerError turns a node's error envelope back into the error the node
// had, so an API server answers the node's code unchanged.
func (c *Client) answerError(status int, data []byte) error {
	var eb api.ErrorBody
	if json.Unmarshal(data, &eb) != nil || eb.Error.Code == "" {
		return sandbox.Errorf(sandbox.KindInternal, "node %s answered %d", c.node, status)
	}
	return sandbox.Errorf(sandbox.Kind(eb.Error.Code), "%s", eb.Error.Message)
}

// AgentTransport returns a round tripper for sandbox id's agent, acting
// for account: it sends http://sandbox-agent/PATH?Q to the node's
// PathAgent for id, streaming both bodies. The node's own refusals (the
// sandbox is not running there, say) arrive as answers in the error
// envelope, which pass on like the agent's.
func (c *Client) AgentTransport(account, id string) http.RoundTripper {
	return &agentTransport{c: c, account: account, prefix: c.base + sandboxPath(PathAgent, id, "")}
}

type agentTransport struct {
	c       *Client
	account string
	prefix  string // https://ADDR/node/v1/sandboxes/ID/agent/
}

// hopHeaders are the headers of one connection, never relayed; the
// credentials are the platform's, which never reach a node's sandbox.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Authorization", "Proxy-Authorization", "Cookie",
}

func (t *agentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	u, err := url.Parse(t.prefix + strings.TrimPrefix(r.URL.EscapedPath(), "/"))
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	u.RawQuery = r.URL.RawQuery
	out := r.Clone(r.Context())
	out.URL, out.Host, out.RequestURI = u, "", ""
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Header.Set(HeaderAccount, t.account)
	resp, err := t.c.hc.Transport.RoundTrip(out)
	if err != nil {
		return nil, &transportError{t.c.node, err}
	}
	return resp, nil
}
