package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/mcptools"
)

// /v1/mcp serves the MCP tools of "withruntime mcp" over MCP's streamable
// HTTP transport, to callers with a key. The tools act as the caller: each
// call gets a Go client whose requests carry the caller's Authorization
// header and go to this server's own handler in-process (selfTransport),
// so every check of the route table, the manager and billing applies to
// them exactly as to the caller's own requests: a read-only key lists but
// cannot create, another account's sandbox is not found.
//
// The transport runs stateless: no session outlives its HTTP request, so
// nothing of one caller's is kept for another to name. The SDK's DNS
// rebinding guard (a loopback listener refusing other Host names) is off:
// it protects servers that need no credential, and every request here
// carries a bearer key that a rebound page does not have, while it would
// refuse a server behind a reverse proxy on loopback.

// mcpBaseURL is the address the in-process client believes it talks to;
// nothing is dialed.
const mcpBaseURL = "http://withruntime.in-process"

// mcpBodyFactor bounds an MCP message at this many times MaxBodyBytes: a
// message holds a JSON body (a cell's code, a file's content) escaped.
const mcpBodyFactor = 4

func (s *server) mcpHandler() http.Handler {
	tools := mcptools.NewServerFor(s.mcpClient, mcptools.Options{})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tools }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		DisableLocalhostProtection:   true,
		MaxRequestBodyBytes:          mcpBodyFactor * s.cfg.MaxBodyBytes,
		PropagateRequestCancellation: true,
		Logger:                       s.log,
	})
}

// serveMCP is the route's handler: the route table has checked the key.
func (s *server) serveMCP(w http.ResponseWriter, r *http.Request, _ caller) error {
	s.mcpOnce.Do(func() { s.mcp = s.mcpHandler() })
	s.mcp.ServeHTTP(w, r)
	return nil
}

// mcpClient is the client a tool call acts through: the caller's key, sent
// to this server in-process.
func (s *server) mcpClient(_ context.Context, req *mcp.CallToolRequest) (*client.Client, error) {
	var auth string
	if req.Extra != nil {
		auth = req.Extra.Header.Get("Authorization")
	}
	key, ok := bearer(auth)
	if !ok {
		return nil, &client.APIError{Code: client.CodeUnauthorized, Status: http.StatusUnauthorized, Message: "missing API key"}
	}
	return client.New(client.WithBaseURL(mcpBaseURL), client.WithAPIKey(key),
		client.WithHTTPClient(&http.Client{Transport: selfTransport{s}}), client.WithUserAgent("withruntime-mcp"))
}

// selfTransport serves a request with h in-process. The answer streams:
// RoundTrip returns once the handler has written its header, and the body
// is what it writes after, as it writes it (exec and code streams pass
// through); closing the body early ends the handler's context.
type selfTransport struct{ h http.Handler }

func (t selfTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	// The request has no connection of its own: a typed nil hides the
	// caller's, which its own request already holds and watches.
	ctx = context.WithValue(ctx, connKey{}, (*conn)(nil))
	in := req.Clone(ctx)
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "in-process"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer cancel()
		defer func() {
			p := recover()
			w.WriteHeader(http.StatusInternalServerError) // when nothing was written
			if p != nil {
				pw.CloseWithError(fmt.Errorf("in-process handler: %v", p))
			} else {
				pw.Close()
			}
			if req.Body != nil {
				req.Body.Close()
			}
		}()
		t.h.ServeHTTP(w, in)
		w.WriteHeader(http.StatusOK) // a handler that wrote nothing answered 200
	}()
	<-w.ready
	resp := &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &pipeBody{PipeReader: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}
	if n, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		resp.ContentLength = n
	}
	return resp, nil
}

// pipeResponse is the handler's side of selfTransport: the header is sent
// once, the body written into a pipe.
type pipeResponse struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{} // closed once status and sent are set
	status int
	sent   http.Header
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	if code < 200 {
		return // informational: the final header follows
	}
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush does nothing: every Write reaches the reader at once.
func (w *pipeResponse) Flush() {}

// pipeBody is the client's side: closing it ends the handler's writes and
// its context.
type pipeBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *pipeBody) Close() error {
	b.cancel()
	return b.PipeReader.CloseWithError(io.ErrClosedPipe)
}
