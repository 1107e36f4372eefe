package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// SecretStore keeps the secrets of every account (internal/secrets.Vault).
// Values go in through Set and never come out: nothing here reads them.
// Errors carry a sandbox.Kind and never hold a value.
type SecretStore interface {
	// Set stores value as secret name of account, bound to host, replacing
	// any secret of that name.
	Set(ctx context.Context, account, name, host, value string) (api.SecretInfo, error)
	// List returns the names and hosts of account's secrets.
	List(ctx context.Context, account string) ([]api.SecretInfo, error)
	// Delete removes a secret; not_found when account has none of that name.
	Delete(ctx context.Context, account, name string) error
	// Placeholders returns what each of account's secret names is set to in
	// the environment of its sandboxes' commands.
	Placeholders(ctx context.Context, account string) (map[string]string, error)
}

// secretStore returns the configured store, or the error that says this
// server keeps no secrets.
func (s *server) secretStore() (SecretStore, error) {
	if s.cfg.Secrets == nil {
		return nil, sandbox.Errorf(sandbox.KindNotSupported, "this server does not keep secrets")
	}
	return s.cfg.Secrets, nil
}

func (s *server) setSecret(w http.ResponseWriter, r *http.Request, c caller) error {
	st, err := s.secretStore()
	if err != nil {
		return err
	}
	var req api.SetSecretRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		if sandbox.KindOf(err) == sandbox.KindInvalid {
			// A syntax error's message quotes the body, which holds the value.
			return sandbox.Errorf(sandbox.KindInvalid, `request body must be a JSON object {"value": "...", "host": "..."}`)
		}
		return err
	}
	info, err := st.Set(r.Context(), c.account, r.PathValue("name"), req.Host, req.Value)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (s *server) listSecrets(w http.ResponseWriter, r *http.Request, c caller) error {
	st, err := s.secretStore()
	if err != nil {
		return err
	}
	list, err := st.List(r.Context(), c.account)
	if err != nil {
		return err
	}
	if list == nil {
		list = []api.SecretInfo{}
	}
	writeJSON(w, http.StatusOK, api.SecretList{Secrets: list})
	return nil
}

func (s *server) deleteSecret(w http.ResponseWriter, r *http.Request, c caller) error {
	st, err := s.secretStore()
	if err != nil {
		return err
	}
	if err := st.Delete(r.Context(), c.account, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// addPlaceholders sets each of the account's secret names that env does
// not set to its placeholder, so that every command sees the secrets as
// they are when it starts.
func (s *server) addPlaceholders(ctx context.Context, account string, env map[string]string) (map[string]string, error) {
	if s.cfg.Secrets == nil {
		return env, nil
	}
	ph, err := s.cfg.Secrets.Placeholders(ctx, account)
	if err != nil {
		return nil, fmt.Errorf("reading the account's secret placeholders: %w", err)
	}
	for name, p := range ph {
		if _, set := env[name]; set {
			continue
		}
		if env == nil {
			env = make(map[string]string, len(ph))
		}
		env[name] = p
	}
	return env, nil
}
