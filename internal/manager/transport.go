package manager

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// newAgentTransport is the HTTP transport to one instance's agent: every
// connection is dialed through the backend, never by address.
func newAgentTransport(inst sandbox.Instance) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return inst.DialAgent(ctx)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
}
