package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/api"
)

// Preview returns how to reach port of sandbox id over HTTP: its path on
// the API (and its host name where the server serves previews by host),
// whether it is public and, when it is not, a new preview token valid for
// that sandbox and port only. expiresIn is the token's life (0: the
// server's default, a day; the server takes 1 minute to 7 days).
func (c *Client) Preview(ctx context.Context, id string, port int, expiresIn time.Duration) (*api.Preview, error) {
	path, err := previewPath(id, port)
	if err != nil {
		return nil, err
	}
	var q url.Values
	if expiresIn > 0 {
		// Whole seconds, rounded up: a token never lives less than asked.
		q = url.Values{"expires_in": {strconv.FormatInt(int64((expiresIn+time.Second-1)/time.Second), 10)}}
	}
	var p api.Preview
	if err := c.doJSON(ctx, http.MethodGet, path, q, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// SetPreviewPublic makes port of sandbox id public (anyone with its URL
// reaches it, no token needed) or private again, and returns its preview
// as Preview does (with a token when private).
func (c *Client) SetPreviewPublic(ctx context.Context, id string, port int, public bool) (*api.Preview, error) {
	path, err := previewPath(id, port)
	if err != nil {
		return nil, err
	}
	var p api.Preview
	if err := c.doJSON(ctx, http.MethodPut, path, nil, api.SetPreviewRequest{Public: public}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// RevokePreviews makes every preview token made so far for sandbox id stop
// working. Public ports stay public (SetPreviewPublic makes them private).
func (c *Client) RevokePreviews(ctx context.Context, id string) error {
	path, err := sandboxPath(id, "/previews/revoke")
	if err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodPost, path, nil, nil, nil)
}

// PreviewURL returns the URL that opens p in a browser: its host form when
// the server serves previews by host name, else its path on the client's
// base URL; signed with p's token (as the query parameter
// api.PreviewTokenParam) unless the port is public. The server answers the
// first visit of a signed URL with a cookie and a redirect to the URL
// without the token.
func (c *Client) PreviewURL(p *api.Preview) string {
	u := p.URL
	if u == "" {
		u = c.baseURL + p.Path
	}
	if p.Token == "" {
		return u
	}
	sep := "?"
	if pu, err := url.Parse(u); err == nil && pu.RawQuery != "" {
		sep = "&"
	}
	return u + sep + api.PreviewTokenParam + "=" + url.QueryEscape(p.Token)
}

func previewPath(id string, port int) (string, error) {
	if err := checkPort(port); err != nil {
		return "", err
	}
	return sandboxPath(id, "/previews/"+strconv.Itoa(port))
}

// checkPort refuses a port number no TCP port has, before anything is
// sent, as the server would.
func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: "port " + strconv.Itoa(port) + " is not a TCP port (1 to 65535)"}
	}
	return nil
}
