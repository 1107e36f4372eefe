package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// Defaults and the environment variables New reads.
const (
	DefaultBaseURL   = "http://127.0.0.1:7878"
	DefaultUserAgent = "withruntime-go"
	EnvBaseURL       = "WITHRUNTIME_BASE_URL"
	EnvAPIKey        = "WITHRUNTIME_API_KEY"
)

// maxJSONBody bounds a JSON answer read into memory. Lists of sandboxes or
// files are the largest; none comes near it.
const maxJSONBody = 64 << 20

// Client talks to one withruntime server. It is safe for concurrent use.
type Client struct {
	baseURL    string // scheme://host[/prefix], without a trailing slash
	apiKey     string
	keySet     bool // by WithAPIKey: no key discovery
	httpClient *http.Client
	userAgent  string
	filesUser  string // by AsFilesUser: the ?user= of file and archive calls
	reserve    ReserveFunc

	listenerOwner *int // connections only to this uid's listeners (see WithListenerOwner)
}

// Option configures a Client in New.
type Option func(*Client)

// WithBaseURL sets the server's address, such as https://runtime.example.org.
// An empty string keeps the default.
func WithBaseURL(u string) Option {
	return func(c *Client) {
		if u != "" {
			c.baseURL = u
		}
	}
}

// WithAPIKey sets the key sent as "Authorization: Bearer KEY". An empty key
// sends no Authorization header.
func WithAPIKey(key string) Option {
	return func(c *Client) { c.apiKey, c.keySet = key, true }
}

// WithHTTPClient sets the HTTP client. Exec streams and long polls last as
// long as the command: do not give it a short Timeout; bound calls with
// their context instead.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.httpClient = hc
		}
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(c *Client) {
		if ua != "" {
			c.userAgent = ua
		}
	}
}

// New makes a Client. Without options it reads the server's address from
// WITHRUNTIME_BASE_URL (default http://127.0.0.1:7878) and the key from
// WITHRUNTIME_API_KEY; options override both. With no key from either and
// the default address, it uses the local daemon's admin key when it can
// read it (see LocalKey), and then connects only to a listener of the key
// file's owner (see WithListenerOwner).
func New(opts ...Option) (*Client, error) {
	c := &Client{
		baseURL:    os.Getenv(EnvBaseURL),
		apiKey:     os.Getenv(EnvAPIKey),
		httpClient: &http.Client{},
		userAgent:  DefaultUserAgent,
	}
	if c.baseURL == "" {
		c.baseURL = DefaultBaseURL
	}
	for _, o := range opts {
		o(c)
	}
	u, err := url.Parse(c.baseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("base URL %q: want http://HOST[:PORT] or https://HOST[:PORT]", c.baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("base URL %q: must not have a query or fragment", c.baseURL)
	}
	c.baseURL = strings.TrimRight(u.String(), "/")
	if err := c.guardLocal(); err != nil {
		return nil, err
	}
	return c, nil
}

// BaseURL returns the server's address the client uses.
func (c *Client) BaseURL() string { return c.baseURL }

// sandboxPath returns the route of sandbox id followed by suffix.
func sandboxPath(id, suffix string) (string, error) {
	if id == "" {
		return "", errors.New("empty sandbox id")
	}
	return api.Version + "/sandboxes/" + url.PathEscape(id) + suffix, nil
}

// request is one call to the API.
type request struct {
	method      string
	path        string // starting with /v1
	query       url.Values
	body        io.Reader
	contentType string
	accept      string
	noAuth      bool  // send no Authorization header, whatever the client's key
	maxBody     int64 // the most bytes of a whole answer (0: maxJSONBody)
}

func (r request) op(base string) string {
	return r.method + " " + base + r.path
}

// do sends r and returns the response when its status is 2xx. Any other
// status becomes an *APIError; a failure to reach the server a
// *TransportError; an ended context its error.
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	u := c.baseURL + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, r.body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.op(c.baseURL), err)
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.accept == "" {
		r.accept = "application/json"
	}
	req.Header.Set("Accept", r.accept)
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" && !r.noAuth {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.httpClient.Do(req)
	if err != nil {
		return nil, transportError(ctx, r.op(c.baseURL), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	resp.Body = &answerBody{ReadCloser: resp.Body, ctx: ctx, sandbox: sandboxOfPath(r.path), reserve: c.reserve, max: r.maxBody}
	return resp, nil
}

// doJSON sends in (when not nil) as JSON and decodes the answer into out
// (when not nil).
func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	return c.doJSONRequest(ctx, request{method: method, path: path, query: query}, in, out)
}

// doJSONRequest is doJSON for a request with more settings than method,
// path and query.
func (c *Client) doJSONRequest(ctx context.Context, r request, in, out any) error {
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
		r.body = bytes.NewReader(b)
		r.contentType = "application/json"
	}
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	return decodeJSON(ctx, r.op(c.baseURL), resp, out)
}

// decodeJSON reads a whole JSON answer and closes its body. It holds at
// most the route's bound (maxJSONBody unless the request said less), and
// reserves what it holds through the client's ReserveFunc until the
// value is decoded: a larger answer is a *TransportError, a refused
// reservation the ReserveFunc's error.
func decodeJSON(ctx context.Context, op string, resp *http.Response, out any) error {
	defer resp.Body.Close()
	limit := int64(maxJSONBody)
	a, _ := resp.Body.(*answerBody)
	if a != nil && a.max > 0 {
		limit = a.max
	}
	b, release, err := readAnswer(a, resp.Body, resp.ContentLength, limit)
	defer release()
	if err != nil {
		return callError(ctx, op, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: decoding answer: %w", op, err)
	}
	return nil
}

// transportError classifies err from sending a request or reading an
// answer: the caller's context ending is not a transport failure.
func transportError(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", op, ctxErr)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ae *APIError
	if errors.As(err, &ae) { // a listener refused before connecting (WithListenerOwner)
		return ae
	}
	return &TransportError{Op: op, Err: err}
}

// Health checks that the server answers GET /v1/health.
func (c *Client) Health(ctx context.Context) error {
	var h struct {
		Status string `json:"status"`
	}
	if err := c.doJSON(ctx, http.MethodGet, api.Version+"/health", nil, nil, &h); err != nil {
		return err
	}
	if h.Status != "ok" {
		return &APIError{Code: CodeInternal, Status: http.StatusOK, Message: fmt.Sprintf("health status %q", h.Status)}
	}
	return nil
}
