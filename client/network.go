package client

import (
	"context"
	"net/http"

	"github.com/withruntime/withruntime/api"
)

// GetNetwork returns the egress policy of sandbox id.
func (c *Client) GetNetwork(ctx context.Context, id string) (*api.Network, error) {
	p, err := sandboxPath(id, "/network")
	if err != nil {
		return nil, err
	}
	var n api.Network
	if err := c.doJSON(ctx, http.MethodGet, p, nil, nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// SetNetwork replaces the egress policy of sandbox id and returns the
// sandbox; new connections follow the policy at once.
func (c *Client) SetNetwork(ctx context.Context, id string, n api.Network) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPut, id, "/network", n)
}

// Egress returns the egress log of sandbox id: its allowed and refused
// connections and DNS queries, the newest last.
func (c *Client) Egress(ctx context.Context, id string) ([]api.EgressEvent, error) {
	p, err := sandboxPath(id, "/egress")
	if err != nil {
		return nil, err
	}
	var l api.EgressLog
	if err := c.doJSON(ctx, http.MethodGet, p, nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Events, nil
}
