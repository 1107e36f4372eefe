package e2bcompat

import (
	"net/http"
	"sync"
	"time"
)

// A pre-signed /files URL is fetched without the access token (by a
// browser, curl, urllib): its signature proves that its maker held the
// token, and the layer must find which token that was, since the token is
// what holds the key a request acts with. The layer remembers the tokens
// it handed out (create, connect) or opened (every sandbox-side call), by
// sandbox, in memory and bounded: a signed request is checked against
// those of the sandbox its host names, or, routed by header with no
// sandbox in the URL (E2B_SANDBOX_URL), against every one. A URL signed
// with a token this process has not seen since it started (a restart,
// another API server of many hosts) is refused until the token's client
// makes any call through it.

// maxKnownTokens bounds the tokens remembered: a search of them all costs
// one SHA-256 each (about a millisecond for all).
const maxKnownTokens = 4096

// knownTokens are the access tokens seen, each with its sandbox id. Every
// sandbox-side call adds its token (a read lock, once it is known), and
// searches hold the read lock: a flood of forged signatures slows no call.
type knownTokens struct {
	mu      sync.RWMutex
	sandbox map[string]string // token -> sandbox id
	order   []string          // tokens, oldest first
}

// add remembers token as sandbox id's, forgetting the oldest past the
// bound.
func (k *knownTokens) add(id, token string) {
	k.mu.RLock()
	_, seen := k.sandbox[token]
	k.mu.RUnlock()
	if seen {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sandbox == nil {
		k.sandbox = map[string]string{}
	}
	if _, ok := k.sandbox[token]; ok {
		return
	}
	k.sandbox[token] = id
	k.order = append(k.order, token)
	if len(k.order) > maxKnownTokens {
		delete(k.sandbox, k.order[0])
		k.order = append(k.order[:0:0], k.order[1:]...)
	}
}

// find returns the first token (and its sandbox) that match accepts, among
// sandbox id's ("": every sandbox's).
func (k *knownTokens) find(id string, match func(token string) bool) (sandbox, token string, ok bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, t := range k.order {
		sb := k.sandbox[t]
		if (id == "" || sb == id) && match(t) {
			return sb, t, true
		}
	}
	return "", "", false
}

// signedToken finds the token whose signature r's pre-signed URL carries,
// among sandbox id's ("": any sandbox's): ok false when r is not a
// pre-signed /files request, an error when its signature expired or
// matches no token known.
func (s *Server) signedToken(r *http.Request, id string) (sandbox, token string, ok bool, err error) {
	q := r.URL.Query()
	sig := q.Get("signature")
	op := map[string]string{http.MethodGet: "read", http.MethodPost: "write"}[r.Method]
	if sig == "" || r.URL.Path != "/files" || op == "" {
		return "", "", false, nil
	}
	now := time.Now()
	exp, path, user := q.Get("signature_expiration"), q.Get("path"), q.Get("username")
	sandbox, token, found := s.known.find(id, func(t string) bool {
		return checkFileSignature(sig, exp, path, op, user, t, now) == nil
	})
	if !found {
		// The expiry is checked first, so an expired URL says so whatever
		// its signature.
		if err := checkFileSignature(sig, exp, path, op, user, "", now); err != errBadSignature {
			return "", "", false, &Error{Status: http.StatusUnauthorized, Message: err.Error()}
		}
		return "", "", false, &Error{Status: http.StatusUnauthorized, Message: "invalid signature (or one made with an access token this server has not seen since it started: call the sandbox once with it)"}
	}
	return sandbox, token, true, nil
}
