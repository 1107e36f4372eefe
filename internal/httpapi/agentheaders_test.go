package httpapi

import (
	"net/http"
	"testing"
)

// TestKeepAgentHeaders: an answer from the agent (or from root's program
// posing as it) passes only the contract's headers, never content a
// browser would render on the API's origin.
func TestKeepAgentHeaders(t *testing.T) {
	tests := []struct {
		name     string
		in, want http.Header
	}{
		{"exec stream", http.Header{"Content-Type": {"application/x-ndjson"}, "Cache-Control": {"no-store"}},
			http.Header{"Content-Type": {"application/x-ndjson"}, "Cache-Control": {"no-store"}}},
		{"cookies, CORS and ids dropped", http.Header{
			"Content-Type": {"application/json"}, "Set-Cookie": {"a=b"}, "Access-Control-Allow-Origin": {"*"},
			"X-Request-Id": {"forged"}, "Location": {"http://elsewhere"}},
			http.Header{"Content-Type": {"application/json"}}},
		{"html is not served", http.Header{"Content-Type": {"text/html"}, "Content-Length": {"5"}},
			http.Header{"Content-Type": {"application/octet-stream"}, "Content-Length": {"5"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.in.Clone()
			keepAgentHeaders(h)
			if len(h) != len(tt.want) {
				t.Fatalf("got %v, want %v", h, tt.want)
			}
			for k, v := range tt.want {
				if h.Get(k) != v[0] {
					t.Fatalf("%s: got %q, want %q", k, h.Get(k), v[0])
				}
			}
		})
	}
}
