package httpapi

import (
	"bufio"
	"context"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/mcptools"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/selfcall"
)

// /v1/mcp serves the MCP tools of "withruntime mcp" over MCP's streamable
// HTTP transport, to callers with a key. The tools act as the caller: each
// call gets a Go client whose requests carry the caller's Authorization
// header and go to this server's own handler in-process (selfcall),
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

// Each HTTP request gets a server of its own (the tools' schemas are
// cached across them), so a tool call can be tied to its request: a
// client that goes away cancels its call, and so its exec or cell, on
// every protocol revision, as it would cancel a direct API call. A call's
// requests to this server are counted against the caller's account
// (mcpSlots), since, having no connection of their own, the listener's
// count of requests in progress does not see them; and a JSON-RPC batch,
// many calls under one request, is refused.

// mcpBaseURL is the address the in-process client believes it talks to;
// nothing is dialed.
const mcpBaseURL = "http://withruntime.in-process"

// mcpBodyFactor bounds an MCP message at this many times MaxBodyBytes: a
// message holds a JSON body (a cell's code, a file's content) escaped.
const mcpBodyFactor = 4

// mcpCall is what a tool call knows of the request that carries it.
type mcpCall struct {
	account    string
	perAccount int // the account's share of requests in progress
}

type mcpCallKey struct{}

func (s *server) mcpHandler() http.Handler {
	schemas := mcp.NewSchemaCache()
	slots := &mcpSlots{}
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		call, _ := r.Context().Value(mcpCallKey{}).(mcpCall)
		inner := &http.Client{Transport: selfcall.Transport{Handler: slots.limit(call, admission.InProcess(s))}}
		tools := mcptools.NewServerFor(func(_ context.Context, req *mcp.CallToolRequest) (*client.Client, error) {
			c, err := mcpClient(inner, req)
			if err != nil {
				return nil, err
			}
			return c.Reserving(s.reserveFor(call.account)), nil
		}, mcptools.Options{SchemaCache: schemas})
		tools.AddReceivingMiddleware(endWith(r.Context()))
		return tools
	}, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		DisableLocalhostProtection:   true,
		MaxRequestBodyBytes:          mcpBodyFactor * s.cfg.MaxBodyBytes,
		PropagateRequestCancellation: true,
		Logger:                       s.log,
	})
}

// serveMCP is the route's handler: the route table has checked the key.
func (s *server) serveMCP(w http.ResponseWriter, r *http.Request, c caller) error {
	if err := refuseBatch(r); err != nil {
		return err
	}
	call := mcpCall{account: c.account, perAccount: admission.Share(r.Context())}
	s.mcpOnce.Do(func() { s.mcp = s.mcpHandler() })
	s.mcp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mcpCallKey{}, call)))
	return nil
}

// mcpMethodNotAllowed answers a request of /v1/mcp by another method
// than POST (GET for a stream of the server's own messages, DELETE to end
// a session): 405, as MCP asks of a server that serves neither, since
// this one keeps no session and sends nothing unasked.
func mcpMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	err := sandbox.Errorf(sandbox.KindInvalid, "%s %s is not served: MCP messages are POSTed, one per request, and no session is kept", r.Method, r.URL.Path)
	if info := infoFrom(r.Context()); info != nil {
		info.err = err
	}
	w.Header().Set("Allow", http.MethodPost)
	writeJSON(w, http.StatusMethodNotAllowed, api.ErrorBody{Error: ErrorDetail(err)})
}

// refuseBatch refuses a JSON-RPC batch (a body whose first byte past
// white space is "["): its calls would run under one counted request.
// What it reads stays in r.Body for the SDK.
func refuseBatch(r *http.Request) error {
	br := bufio.NewReader(r.Body)
	for {
		b, err := br.Peek(1)
		if err != nil {
			break // an empty or failing body: the SDK answers it
		}
		if b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r' {
			br.Discard(1)
			continue
		}
		if b[0] == '[' {
			return sandbox.Errorf(sandbox.KindInvalid, "JSON-RPC batches are not supported: send one message per request")
		}
		break
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{br, r.Body}
	return nil
}

// endWith ends every method a server handles when ctx (its HTTP
// request's) ends: the SDK does so itself only from protocol revision
// 2026-07-28 on.
func endWith(ctx context.Context) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(inner context.Context, method string, req mcp.Request) (mcp.Result, error) {
			inner, cancel := context.WithCancel(inner)
			defer cancel()
			defer context.AfterFunc(ctx, cancel)()
			return next(inner, method, req)
		}
	}
}

// mcpClient is the client a tool call acts through: the caller's key, sent
// to this server in-process through hc.
func mcpClient(hc *http.Client, req *mcp.CallToolRequest) (*client.Client, error) {
	var auth string
	if req.Extra != nil {
		auth = req.Extra.Header.Get("Authorization")
	}
	key, ok := bearer(auth)
	if !ok {
		return nil, &client.APIError{Code: client.CodeUnauthorized, Status: http.StatusUnauthorized, Message: "missing API key"}
	}
	return client.New(client.WithBaseURL(mcpBaseURL), client.WithAPIKey(key),
		client.WithHTTPClient(hc), client.WithUserAgent("withruntime-mcp"))
}

// mcpSlots counts the in-process requests of tool calls in progress by
// account (admission.AccountSlots).
type mcpSlots struct{ admission.AccountSlots }

// limit serves with h the requests of call's tool calls while its
// account holds fewer than its share, and refuses the others as the
// listener refuses a direct request past the share.
func (m *mcpSlots) limit(call mcpCall, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !m.Take(call.account, call.perAccount) {
			w.Header().Set("Retry-After", "1")
			writeError(w, r, admission.TooManyInProgress(call.perAccount))
			return
		}
		defer m.Give(call.account)
		h.ServeHTTP(w, r)
	})
}

// selfTransport serves a request with h in-process (package selfcall).
func selfTransport(h http.Handler) http.RoundTripper {
	return selfcall.Transport{Handler: admission.InProcess(h)}
}
