package client

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// ListOptions narrows GET /v1/sandboxes. The zero value lists every
// sandbox that has not ended and those that ended in the last 24 hours.
type ListOptions struct {
	// States keeps only these states ("running", "paused", ...).
	States []string
	// Metadata keeps only sandboxes whose metadata has every pair.
	Metadata map[string]string
	// All also lists sandboxes that ended more than 24 hours ago.
	All bool
	// Limit is the page size (the server's default when 0).
	Limit int
	// PageToken is the NextPageToken of the previous page.
	PageToken string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if len(o.States) > 0 {
		q.Set("state", strings.Join(o.States, ","))
	}
	keys := make([]string, 0, len(o.Metadata))
	for k := range o.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Add("metadata", k+"="+o.Metadata[k])
	}
	if o.All {
		q.Set("all", "true")
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.PageToken != "" {
		q.Set("page_token", o.PageToken)
	}
	return q
}

// ListSandboxesPage returns one page of the account's sandboxes, newest
// first.
func (c *Client) ListSandboxesPage(ctx context.Context, o ListOptions) (*api.SandboxList, error) {
	var l api.SandboxList
	if err := c.doJSON(ctx, http.MethodGet, api.Version+"/sandboxes", o.query(), nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// ListSandboxesWith returns every page of the sandboxes o selects, newest
// first.
func (c *Client) ListSandboxesWith(ctx context.Context, o ListOptions) ([]api.Sandbox, error) {
	var all []api.Sandbox
	for {
		l, err := c.ListSandboxesPage(ctx, o)
		if err != nil {
			return nil, err
		}
		all = append(all, l.Sandboxes...)
		if l.NextPageToken == "" || l.NextPageToken == o.PageToken {
			return all, nil
		}
		o.PageToken = l.NextPageToken
	}
}
