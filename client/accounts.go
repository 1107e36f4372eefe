package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/withruntime/withruntime/api"
)

// CreateAccount creates an account (admin key only). Zero fields of req take
// the server's defaults.
func (c *Client) CreateAccount(ctx context.Context, req api.CreateAccountRequest) (*api.Account, error) {
	var a api.Account
	if err := c.doJSON(ctx, http.MethodPost, api.Version+"/accounts", nil, req, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ListAccounts returns every account (admin key only).
func (c *Client) ListAccounts(ctx context.Context) ([]api.Account, error) {
	var l api.AccountList
	if err := c.doJSON(ctx, http.MethodGet, api.Version+"/accounts", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Accounts, nil
}

// CreateKey creates an API key and returns it with its secret (Key.Secret),
// which the server shows only this once. Account defaults to the caller's;
// only the admin key names another.
func (c *Client) CreateKey(ctx context.Context, req api.CreateKeyRequest) (*api.Key, error) {
	var k api.Key
	if err := c.doJSON(ctx, http.MethodPost, api.Version+"/keys", nil, req, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// ListKeys returns the keys of the caller's account, or with the admin key
// those of account (every account's when account is empty). Secrets are
// never shown.
func (c *Client) ListKeys(ctx context.Context, account string) ([]api.Key, error) {
	var q url.Values
	if account != "" {
		q = url.Values{"account": {account}}
	}
	var l api.KeyList
	if err := c.doJSON(ctx, http.MethodGet, api.Version+"/keys", q, nil, &l); err != nil {
		return nil, err
	}
	return l.Keys, nil
}

// DeleteKey removes key id and the keys made with it: they stop working at
// once.
func (c *Client) DeleteKey(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("empty key id")
	}
	return c.doJSON(ctx, http.MethodDelete, api.Version+"/keys/"+url.PathEscape(id), nil, nil, nil)
}

// UsageFilter selects the usage GET /v1/usage returns. Empty fields select
// everything the key may see. From and To are UTC days (YYYY-MM-DD),
// inclusive; Account is honored for the admin key only.
type UsageFilter struct {
	Account string
	Key     string
	From    string
	To      string
}

func (f UsageFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"account": f.Account, "key": f.Key, "from": f.From, "to": f.To} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// Usage returns usage per account, key and UTC day, and its total cost.
func (c *Client) Usage(ctx context.Context, f UsageFilter) (*api.Usage, error) {
	var u api.Usage
	if err := c.doJSON(ctx, http.MethodGet, api.Version+"/usage", f.query(), nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// Trial asks the server for a trial account and returns its full key. It
// sends no Authorization header, whatever the client's key. Servers offer
// trials only when started with --allow-trial (otherwise the call fails
// with forbidden or not_found) and rate-limit them per client address
// (rate_limited).
func (c *Client) Trial(ctx context.Context) (*api.Trial, error) {
	var t api.Trial
	r := request{method: http.MethodPost, path: api.Version + "/trial", noAuth: true}
	if err := c.doJSONRequest(ctx, r, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
