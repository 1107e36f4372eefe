package client

import (
	"context"
	"net/http"

	"github.com/withruntime/withruntime/api"
)

// SetAllPortsPublic serves every port of sandbox id's preview URLs with no
// key or token (true), or only the ports made public one by one (false):
// E2B's public traffic.
func (c *Client) SetAllPortsPublic(ctx context.Context, id string, public bool) (*api.PreviewSettings, error) {
	p, err := sandboxPath(id, "/previews")
	if err != nil {
		return nil, err
	}
	var out api.PreviewSettings
	if err := c.doJSON(ctx, http.MethodPut, p, nil, api.SetPreviewsRequest{AllPublic: public}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
