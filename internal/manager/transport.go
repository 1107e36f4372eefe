package manager

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Bounds on what the host reads from an agent, which root inside the
// sandbox can replace with a program of its own: the answers' headers are
// small, and a sandbox cannot hold more connections of the server than
// this. Bodies are streamed, never buffered (exec lines are bounded in
// internal/httpapi); an answer that never comes ends with the sandbox,
// whose link closes every connection.
const (
	agentMaxHeaderBytes = 64 << 10
	agentMaxConns       = 256
)

// newAgentTransport is the HTTP transport to one instance's agent: every
// connection is one the agent opened to the backend's listener, never one
// dialed by address.
func newAgentTransport(inst sandbox.Instance) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return inst.DialAgent(ctx)
		},
		MaxIdleConnsPerHost:    16,
		MaxConnsPerHost:        agentMaxConns,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: agentMaxHeaderBytes,
		DisableCompression:     true,
	}
}
