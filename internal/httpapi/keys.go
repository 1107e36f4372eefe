package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// maxKeyName bounds the free-text name of a key.
const maxKeyName = 100

func (s *server) createKey(w http.ResponseWriter, r *http.Request, c caller) error {
	var req api.CreateKeyRequest
	// An empty body asks for a full key of the caller's account.
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, true, &req); err != nil {
		return err
	}
	kind := store.KeyKind(req.Kind)
	switch kind {
	case "":
		kind = store.KeyFull
	case store.KeyFull, store.KeyReadOnly:
	case store.KeyAdmin:
		if c.kind != store.KeyAdmin {
			return sandbox.Errorf(sandbox.KindForbidden, "only the admin key can create admin keys")
		}
	default:
		return sandbox.Errorf(sandbox.KindInvalid, `kind must be "full" or "read_only", not %q`, req.Kind)
	}
	if req.DailyLimitMicros < 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "daily_limit_micros must not be negative (0: no limit)")
	}
	if len(req.Name) > maxKeyName {
		return sandbox.Errorf(sandbox.KindInvalid, "name must be at most %d bytes", maxKeyName)
	}
	account, err := s.targetAccount(r.Context(), c, req.Account, true)
	if err != nil {
		return err
	}
	secret, k := newKey(account, kind)
	k.Name = req.Name
	k.DailyLimitMicros = req.DailyLimitMicros
	if c.kind == store.KeyAdmin {
		err = s.cfg.Store.PutKey(r.Context(), k)
	} else {
		err = s.putBoundKey(r.Context(), w, c, &k, req.DailyLimitMicros)
	}
	if err != nil {
		return err
	}
	v := keyView(k)
	v.Secret = secret
	writeJSON(w, http.StatusCreated, v)
	return nil
}

// putBoundKey stores k, made by the non-admin caller, bound to the caller's
// key (bindToMaker) and within the account's bounds on keys (keyBounds).
// The binding and the bounds on the keys the account holds are checked
// again in the store's transaction that inserts k: another API server
// removing the caller's key, or making keys, meanwhile refuses the insert.
func (s *server) putBoundKey(ctx context.Context, w http.ResponseWriter, c caller, k *store.Key, requested int64) error {
	b, err := s.keyBoundsOf(ctx, c.account)
	if err != nil {
		return err
	}
	all, err := s.cfg.Store.ListAllKeys(ctx, c.account)
	if err != nil {
		return err
	}
	if wait, err := b.made(all, time.Now()); err != nil {
		if wait > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		}
		return err
	}
	keys, err := s.cfg.Store.ListKeys(ctx, c.account)
	if err != nil {
		return err
	}
	if err := bindToMaker(c, keys, k, requested); err != nil {
		return err
	}
	return s.cfg.Store.PutKeyIf(ctx, *k, func(keys []store.Key) error {
		if err := b.held(c.account, keys); err != nil {
			return err
		}
		again := *k
		if err := bindToMaker(c, keys, &again, requested); err != nil {
			return err
		}
		if again.Parent != k.Parent || again.DailyLimitMicros != k.DailyLimitMicros {
			return sandbox.Errorf(sandbox.KindConflict, "the keys of account %s changed meanwhile: try again", c.account)
		}
		return nil
	})
}

func (s *server) listKeys(w http.ResponseWriter, r *http.Request, c caller) error {
	q := r.URL.Query()
	if err := checkParams(q, "account"); err != nil {
		return err
	}
	account := ""
	if c.kind != store.KeyAdmin || q.Get("account") != "" {
		var err error
		if account, err = s.targetAccount(r.Context(), c, q.Get("account"), false); err != nil {
			return err
		}
	}
	keys, err := s.cfg.Store.ListKeys(r.Context(), account)
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

// deleteKey removes a key of the caller's account (any key, for the admin
// key), and with it every key made through it. Only the admin key removes
// admin keys, and never the last one: the operator would be locked out of
// managing accounts. A key made by another key removes only itself and
// the keys made through it (mayRemove).
func (s *server) deleteKey(w http.ResponseWriter, r *http.Request, c caller) error {
	id := r.PathValue("kid")
	account := c.account
	if c.kind == store.KeyAdmin {
		account = ""
	}
	// The rules are checked over the keys read in the transaction that
	// removes the key: two API servers removing the last two admin keys at
	// once cannot both succeed.
	err := s.cfg.Store.DeleteKeyIf(r.Context(), id, account, func(keys []store.Key) error {
		return mayDelete(c, keys, id)
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// mayDelete refuses what deleteKey must not do to key id, over keys (the
// caller's account's, or every key for the admin key).
func mayDelete(c caller, keys []store.Key, id string) error {
	var target *store.Key
	admins := 0
	for i, k := range keys {
		if k.ID == id {
			target = &keys[i]
		}
		if k.Kind == store.KeyAdmin {
			admins++
		}
	}
	switch {
	case target == nil:
		return sandbox.Errorf(sandbox.KindNotFound, "key %s not found", id)
	case target.Kind == store.KeyAdmin && c.kind != store.KeyAdmin:
		return sandbox.Errorf(sandbox.KindForbidden, "only the admin key can remove an admin key")
	case target.Kind == store.KeyAdmin && admins == 1:
		return sandbox.Errorf(sandbox.KindConflict, "key %s is the last admin key: create another before removing it", id)
	}
	return mayRemove(c, store.NewKeyTree(keys), id)
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

// newKey makes a key of account with a fresh secret, which it returns: the
// key keeps only the secret's SHA-256.
func newKey(account string, kind store.KeyKind) (string, store.Key) {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	secret := "wr_" + base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(secret))
	return secret, store.Key{
		ID:        "key_" + randHex(12),
		Account:   account,
		Kind:      kind,
		Hash:      sum[:],
		CreatedAt: time.Now().UTC(),
	}
}

// randHex is n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
