package httpapi

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/mcptools"
	"github.com/withruntime/withruntime/internal/selfcall"
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
		client.WithHTTPClient(&http.Client{Transport: selfTransport(s)}), client.WithUserAgent("withruntime-mcp"))
}

// selfTransport serves a request with h in-process (package selfcall).
func selfTransport(h http.Handler) http.RoundTripper {
	return selfcall.Transport{Handler: InProcess(h)}
}

// InProcess is h for requests made in-process (selfcall): the request has
// no connection of its own, and a typed nil hides the caller's, which the
// caller's own request already holds and watches.
func InProcess(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), connKey{}, (*conn)(nil))))
	})
}
