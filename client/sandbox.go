package client

import (
	"context"
	"net/http"

	"github.com/withruntime/withruntime/api"
)

// CreateSandbox creates a sandbox and returns it running. Zero fields of req
// take the server's defaults.
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	var s api.Sandbox
	if err := c.doJSON(ctx, http.MethodPost, api.Version+"/sandboxes", nil, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// GetSandbox returns sandbox id.
func (c *Client) GetSandbox(ctx context.Context, id string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodGet, id, "", nil)
}

// ListSandboxes returns the sandboxes the key's account may see that have
// not ended or ended in the last 24 hours, newest first (every page).
func (c *Client) ListSandboxes(ctx context.Context) ([]api.Sandbox, error) {
	return c.ListSandboxesWith(ctx, ListOptions{})
}

// StopSandbox stops sandbox id (a paused one is removed) and returns it
// ended.
func (c *Client) StopSandbox(ctx context.Context, id string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodDelete, id, "", nil)
}

// ExtendSandbox makes the lease of sandbox id last at least seconds from
// now; one that already ends later is kept (an extend never shortens it).
func (c *Client) ExtendSandbox(ctx context.Context, id string, seconds int) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/extend", api.ExtendRequest{TimeoutSeconds: seconds})
}

// SetSandboxTimeout makes the lease of sandbox id end seconds from now,
// sooner or later than it did.
func (c *Client) SetSandboxTimeout(ctx context.Context, id string, seconds int) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/extend", api.ExtendRequest{TimeoutSeconds: seconds, Exact: true})
}

// PauseSandbox checkpoints sandbox id (disk, memory and processes) and
// releases its memory and CPU on the host.
func (c *Client) PauseSandbox(ctx context.Context, id string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/pause", nil)
}

// ResumeSandbox brings a paused sandbox back to running.
func (c *Client) ResumeSandbox(ctx context.Context, id string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/resume", nil)
}

func (c *Client) sandboxCall(ctx context.Context, method, id, suffix string, in any) (*api.Sandbox, error) {
	p, err := sandboxPath(id, suffix)
	if err != nil {
		return nil, err
	}
	var s api.Sandbox
	if err := c.doJSON(ctx, method, p, nil, in, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
