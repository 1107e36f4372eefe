package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/withruntime/withruntime/api"
)

// SetSecret stores value as the secret name of the key's account, bound to
// host (a DNS name, or "*." and a domain for every name under it),
// replacing the secret of that name if there is one. Every command in the
// account's sandboxes then sees the variable name set to a placeholder;
// the platform's egress proxy puts value in its place in HTTPS requests
// to host only. No call returns the value.
func (c *Client) SetSecret(ctx context.Context, name, host, value string) (*api.SecretInfo, error) {
	p, err := secretPath(name)
	if err != nil {
		return nil, err
	}
	var info api.SecretInfo
	if err := c.doJSON(ctx, http.MethodPut, p, nil, api.SetSecretRequest{Value: value, Host: host}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// ListSecrets returns the names and hosts of the account's secrets.
func (c *Client) ListSecrets(ctx context.Context) ([]api.SecretInfo, error) {
	var l api.SecretList
	if err := c.doJSON(ctx, http.MethodGet, api.Version+"/secrets", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Secrets, nil
}

// DeleteSecret removes the secret name; commands started afterwards no
// longer see its placeholder.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	p, err := secretPath(name)
	if err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, p, nil, nil, nil)
}

func secretPath(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty secret name")
	}
	return api.Version + "/secrets/" + url.PathEscape(name), nil
}
