// Package mcptest is what the tests of the MCP tools share as a client, in
// process (internal/httpapi) and end to end (test/e2e): a transport that
// sends an API key, and a tool call read into the forms tests compare.
package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bearer sends every request with Key as its bearer token.
type Bearer struct{ Key string }

func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Key)
	return http.DefaultTransport.RoundTrip(r)
}

// HTTP is the streamable HTTP transport to endpoint with key.
func HTTP(endpoint, key string) mcp.Transport {
	return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: Bearer{key}}}
}

// Call calls a tool, failing the test on a protocol error, and returns its
// result, its text and its structured content as JSON.
func Call(ctx context.Context, t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string, string) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	b, _ := json.Marshal(res.StructuredContent)
	return res, text.String(), string(b)
}
