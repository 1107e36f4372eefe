package mcptools

import (
	"context"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/client"
)

// ClientFunc returns the client a tool call acts through. The API server
// makes one per call, carrying the caller's key; the CLI has one.
type ClientFunc func(ctx context.Context, req *mcp.CallToolRequest) (*client.Client, error)

// Options configure NewServer.
type Options struct {
	// Version is the server's version in the MCP handshake ("dev" when
	// empty).
	Version string
	// SchemaCache, when set, keeps the tools' schemas across servers: for
	// a caller that makes a server per request.
	SchemaCache *mcp.SchemaCache
}

const instructions = "Tools for withruntime sandboxes: isolated Linux machines (gVisor) with Python 3, pip, git and curl. " +
	"Create one with sandbox_create, pass its id as sandbox_id to the other tools, and stop it with sandbox_stop when done " +
	"(its lease, timeout_seconds, stops it otherwise). The network is off unless sandbox_create asks for it."

// NewServer returns an MCP server whose tools act through c.
func NewServer(c *client.Client, o Options) *mcp.Server {
	return NewServerFor(func(context.Context, *mcp.CallToolRequest) (*client.Client, error) { return c, nil }, o)
}

// NewServerFor returns an MCP server whose tools act through the client
// that clients returns for each call.
func NewServerFor(clients ClientFunc, o Options) *mcp.Server {
	if o.Version == "" {
		o.Version = "dev"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "withruntime", Title: "withruntime sandboxes", Version: o.Version},
		&mcp.ServerOptions{Instructions: instructions, SchemaCache: o.SchemaCache})
	t := tools{clients: clients}
	t.addSandboxTools(s)
	t.addExecTools(s)
	t.addFileTools(s)
	t.addCodeTools(s)
	s.AddReceivingMiddleware(codeArgumentErrors)
	return s
}

// tools holds what every tool handler needs.
type tools struct {
	clients ClientFunc
}

// handler is a tool's work, given its client.
type handler[In, Out any] func(ctx context.Context, c *client.Client, in In) (Out, error)

// add registers a tool whose handler gets its client from t.clients and
// whose errors become tool errors led by their stable code.
func add[In, Out any](s *mcp.Server, t tools, tool *mcp.Tool, h handler[In, Out]) {
	mcp.AddTool(s, tool, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		c, err := t.clients(ctx, req)
		if err != nil {
			return nil, zero, toolError(err)
		}
		out, err := h(ctx, c, in)
		if err != nil {
			return nil, zero, toolError(err)
		}
		return nil, out, nil
	})
}

// toolError is the error of a failed call, which the SDK sends as a
// tool error (isError, its text, no structured content): its text starts
// with the stable code (client.APIError's text already does), so a model
// and a program can both tell a missing sandbox from a refused key.
func toolError(err error) error {
	msg := err.Error()
	var ae *client.APIError
	var te *client.TransportError
	switch {
	case errors.As(err, &ae):
		msg = ae.Code + ": " + ae.Message
		if ae.Message == "" {
			msg = ae.Code
		}
	case errors.As(err, &te):
		msg = client.CodeUnavailable + ": " + msg
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		msg = client.CodeCanceled + ": " + msg
	case errors.As(err, new(*invalidInput)):
		msg = client.CodeInvalidRequest + ": " + msg
	}
	return &codedError{msg: msg, err: err}
}

// codedError is a tool's error, its text led by its stable code.
type codedError struct {
	msg string
	err error
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Unwrap() error { return e.err }

// codeArgumentErrors leads with invalid_request the tool errors the SDK
// makes itself, before a handler runs: arguments that do not match the
// tool's input schema or type. Every error of a handler here is a
// codedError, so a tool error that is not one is the SDK's.
func codeArgumentErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || r == nil || !r.IsError || r.GetError() == nil || errors.As(r.GetError(), new(*codedError)) {
			return res, err
		}
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok && !strings.HasPrefix(tc.Text, client.CodeInvalidRequest+": ") {
				tc.Text = client.CodeInvalidRequest + ": " + tc.Text
			}
		}
		return res, err
	}
}

// invalidInput is an argument the tool refuses before calling the API.
type invalidInput struct{ msg string }

func (e *invalidInput) Error() string { return e.msg }

func invalid(msg string) error { return &invalidInput{msg} }
