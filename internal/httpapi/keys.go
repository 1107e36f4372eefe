package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/accounts"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// createKey makes a key under the rules of accounts.Service.CreateKey; a
// refusal past the day's keys says in Retry-After when to try again.
func (s *server) createKey(w http.ResponseWriter, r *http.Request, c caller) error {
	var req api.CreateKeyRequest
	// An empty body asks for a full key of the caller's account.
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, true, &req); err != nil {
		return err
	}
	secret, k, wait, err := s.accounts.CreateKey(r.Context(), c.who(), accounts.KeyRequest{
		Account: req.Account, Kind: req.Kind, Name: req.Name, DailyLimitMicros: req.DailyLimitMicros, Format: req.Format,
	})
	if err != nil {
		if wait > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		}
		return err
	}
	v := keyView(k)
	v.Secret = secret
	infoFrom(r.Context()).target = k.ID
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func (s *server) listKeys(w http.ResponseWriter, r *http.Request, c caller) error {
	q := r.URL.Query()
	if err := checkParams(q, "account"); err != nil {
		return err
	}
	keys, err := s.accounts.ListKeys(r.Context(), c.who(), q.Get("account"))
	if err != nil {
		return err
	}
	out := api.KeyList{Keys: make([]api.Key, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, keyView(k))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// currentKey shows the caller's own key, without its secret: what a
// client (the web console) learns its kind and limit from.
func (s *server) currentKey(w http.ResponseWriter, r *http.Request, c caller) error {
	keys, err := s.cfg.Store.ListKeys(r.Context(), c.account)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.ID == c.keyID {
			writeJSON(w, http.StatusOK, keyView(k))
			return nil
		}
	}
	// Removed between the lookup and now.
	return sandbox.Errorf(sandbox.KindUnauthorized, "unknown API key")
}

// deleteKey removes a key and the keys made through it, under the rules
// of accounts.Service.DeleteKey.
func (s *server) deleteKey(w http.ResponseWriter, r *http.Request, c caller) error {
	if err := s.accounts.DeleteKey(r.Context(), c.who(), r.PathValue("kid")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// keyView is a key as the API shows it, without its secret.
func keyView(k store.Key) api.Key {
	return api.Key{
		ID:               k.ID,
		Account:          k.Account,
		Kind:             string(k.Kind),
		Name:             k.Name,
		DailyLimitMicros: k.DailyLimitMicros,
		Parent:           k.Parent,
		CreatedAt:        k.CreatedAt,
	}
}
