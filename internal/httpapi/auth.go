package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/accounts"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// caller is who a request acts for, from its key.
type caller struct {
	account string
	keyID   string
	kind    store.KeyKind
}

// canChange reports whether the caller's key may use mutating routes: only
// admin and full keys may, so a kind unknown here changes nothing.
func (c caller) canChange() bool {
	return c.kind == store.KeyAdmin || c.kind == store.KeyFull
}

// who is c as the account rules name a caller.
func (c caller) who() accounts.Caller {
	return accounts.Caller{Account: c.account, KeyID: c.keyID, Kind: c.kind}
}

// authenticate finds the key of "Authorization: Bearer KEY", or on a
// WebSocket route the key a browser's handshake offers as a subprotocol
// (wsBearer). The store finds it by the SHA-256 of the secret; the hash is
// compared again in constant time so that an index lookup is never the
// only check.
func (s *server) authenticate(r *http.Request, rt Route) (caller, error) {
	secret, ok := bearer(r.Header.Get("Authorization"))
	if !ok && rt.WebSocket {
		var err error
		if secret, ok, err = wsBearer(r.Header); err != nil {
			return caller{}, err
		}
	}
	if !ok {
		return caller{}, sandbox.Errorf(sandbox.KindUnauthorized, "missing API key: send Authorization: Bearer KEY")
	}
	return keyCaller(r.Context(), s.cfg.Store, secret)
}

// wsBearer returns the key of a WebSocket handshake's subprotocols
// (api.PtyBearerPrefix+KEY). The handshake must offer api.PtySubprotocol
// too, the one the server selects: a browser fails a handshake whose
// offered subprotocols the server answers with none.
func wsBearer(h http.Header) (string, bool, error) {
	var key string
	var found, named bool
	for _, v := range h.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == api.PtySubprotocol:
				named = true
			case strings.HasPrefix(p, api.PtyBearerPrefix):
				if found {
					return "", false, sandbox.Errorf(sandbox.KindUnauthorized, "more than one key offered as a subprotocol")
				}
				key, found = strings.TrimPrefix(p, api.PtyBearerPrefix), true
			}
		}
	}
	if !found || key == "" {
		return "", false, nil
	}
	if !named {
		return "", false, sandbox.Errorf(sandbox.KindUnauthorized, "a key offered as a subprotocol needs subprotocol %s offered too", api.PtySubprotocol)
	}
	return key, true, nil
}

// KeyLookup is what authentication reads of the store: the key whose
// secret hashes to hash.
type KeyLookup interface {
	KeyByHash(ctx context.Context, hash []byte) (*store.Key, error)
}

// Store is what the API reads and writes of internal/store: what the
// account rules it hands the store to need (accounts.Store) and the key
// lookup of authentication. Sandboxes' records are the service's
// (Config.Sandboxes), never read here.
type Store interface {
	accounts.Store
	KeyLookup
}

// KeyAccounts returns what the layers that act with a client's key
// in-process (the E2B layer) learn their bounds' account from: the
// account of the key whose secret is key, as the API authenticates it, so
// that a bound per account holds whichever of its keys a client uses.
func KeyAccounts(st KeyLookup) func(ctx context.Context, key string) (string, error) {
	return func(ctx context.Context, key string) (string, error) {
		c, err := keyCaller(ctx, st, key)
		return c.account, err
	}
}

// keyCaller is who the key whose secret is secret acts for.
func keyCaller(ctx context.Context, st KeyLookup, secret string) (caller, error) {
	sum := sha256.Sum256([]byte(secret))
	k, err := st.KeyByHash(ctx, sum[:])
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return caller{}, sandbox.Errorf(sandbox.KindUnauthorized, "unknown API key")
	}
	if err != nil {
		return caller{}, sandbox.Wrap(sandbox.KindInternal, err, "internal error")
	}
	if subtle.ConstantTimeCompare(k.Hash, sum[:]) != 1 {
		return caller{}, sandbox.Errorf(sandbox.KindUnauthorized, "unknown API key")
	}
	return caller{account: k.Account, keyID: k.ID, kind: k.Kind}, nil
}

// bearer returns the token of a Bearer authorization header.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
