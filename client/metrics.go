package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/withruntime/withruntime/api"
)

// SandboxMetrics returns sandbox id's resource samples (taken every 5
// seconds while it runs), oldest first, from start to end. A zero start
// or end leaves that side open. E2B calls this getMetrics.
func (c *Client) SandboxMetrics(ctx context.Context, id string, start, end time.Time) ([]api.SandboxMetric, error) {
	p, err := sandboxPath(id, "/metrics")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	// RFC 3339 with nanoseconds keeps a bound exact; the server reads
	// Unix seconds too, as E2B sends them.
	if !start.IsZero() {
		q.Set("start", start.UTC().Format(time.RFC3339Nano))
	}
	if !end.IsZero() {
		q.Set("end", end.UTC().Format(time.RFC3339Nano))
	}
	var out api.SandboxMetrics
	if err := c.doJSON(ctx, http.MethodGet, p, q, nil, &out); err != nil {
		return nil, err
	}
	if out.Metrics == nil {
		out.Metrics = []api.SandboxMetric{}
	}
	return out.Metrics, nil
}
