package e2bcompat

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/withruntime/withruntime/client"
)

// The users E2B clients may name inside a sandbox.
const (
	UserDefault = "user"
	UserRoot    = "root"
)

// The headers the sandbox side carries its token in: envd's, and the
// traffic token the code interpreter sends on /contexts.
const (
	headerAccessToken  = "X-Access-Token"
	headerTrafficToken = "E2B-Traffic-Access-Token"
)

// Sandbox is the sandbox a sandbox-side request addresses.
type Sandbox struct {
	ID string
	// C acts with the key the request's token holds.
	C *client.Client
	// User is who the request acts as: "user" (the default) or "root".
	User string
	// Template is the template the sandbox started from ("default": the
	// built-in image).
	Template string
	// acct is the account the key acts for (Config.Accounts), which the
	// layer's bounds per account (watches, listings, memory) count under,
	// whichever of the account's keys a request holds.
	acct string
	// key names the request's key by its digest, for what must be asked
	// of each key (whether a watcher's sandbox still runs for it).
	key string
}

type sandboxKey struct{}

func withSandbox(ctx context.Context, s *Sandbox) context.Context {
	return context.WithValue(ctx, sandboxKey{}, s)
}

// sandbox returns the sandbox r addresses, checked: the token opens for
// that sandbox id, and the sandbox runs. ServeHTTP has already resolved it
// for every guarded route (sandbox then returns that one).
func (s *Server) sandbox(r *http.Request) (*Sandbox, error) {
	if sbx, ok := r.Context().Value(sandboxKey{}).(*Sandbox); ok {
		return sbx, nil
	}
	id, _, ok := s.route(r)
	if !ok {
		return nil, errNotFound("")
	}
	token := r.Header.Get(headerAccessToken)
	if token == "" {
		token = r.Header.Get(headerTrafficToken)
	}
	if token == "" {
		// A pre-signed URL carries no token: its signature names one.
		_, tok, signed, err := s.signedToken(r, id)
		if err != nil {
			return nil, err
		}
		if !signed {
			return nil, &Error{Status: http.StatusUnauthorized, Message: "missing access token (X-Access-Token)"}
		}
		token = tok
		r.Header.Set(headerAccessToken, tok) // what checkSigned verifies against
	}
	key, err := s.openToken(id, token)
	if err != nil {
		return nil, &Error{Status: http.StatusUnauthorized, Message: "invalid access token for sandbox " + id}
	}
	s.known.add(id, token)
	user, err := requestUser(r)
	if err != nil {
		return nil, err
	}
	c := s.client(key)
	info, err := c.GetSandbox(r.Context(), id)
	var apiErr *client.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.Code == client.CodeNotFound:
		return nil, errNotFound(id)
	case err != nil:
		return nil, err
	case info.State != "running" && !(info.AutoResume && info.State == "paused"):
		// A paused sandbox that resumes on use is woken by the call
		// itself, through the API (manager.Agent).
		return nil, errNotFound(id)
	}
	acct, err := s.account(r.Context(), key)
	if err != nil {
		return nil, err
	}
	return &Sandbox{ID: id, C: c, User: user, Template: info.Template, acct: acct, key: keyDigest(key)}, nil
}

// account is the account key acts for, by Config.Accounts; without it,
// each key stands for an account of its own, named by its digest.
func (s *Server) account(ctx context.Context, key string) (string, error) {
	if s.cfg.Accounts == nil {
		return keyDigest(key), nil
	}
	acct, err := s.cfg.Accounts(ctx, key)
	if err != nil {
		// The API accepted the key a moment ago: the detail is the
		// server's, not the client's.
		s.log.Warn("e2b: finding a key's account", "err", err)
		return "", &Error{Status: http.StatusInternalServerError, Message: "the key's account could not be found"}
	}
	return acct, nil
}

// keyDigest names a key without holding it.
func keyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:12])
}

// errNotFound is what E2B's edge answers for a sandbox that does not run:
// clients look for "was not found" in a 502.
func errNotFound(id string) *Error {
	return &Error{Status: http.StatusBadGateway, Message: "The sandbox " + id + " was not found"}
}

// requestUser is the user a request names: Authorization Basic
// "<user>:" (RPCs) or ?username= (/files); "user" when it names none.
func requestUser(r *http.Request) (string, error) {
	u := r.URL.Query().Get("username")
	if h := r.Header.Get("Authorization"); u == "" && h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Basic") {
			return "", &Error{Status: http.StatusUnauthorized, Message: "Authorization must be Basic <user>:"}
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if err != nil {
			return "", &Error{Status: http.StatusBadRequest, Message: "Authorization: not base64"}
		}
		u, _, _ = strings.Cut(string(b), ":")
	}
	switch u {
	case "":
		return UserDefault, nil
	case UserDefault, UserRoot:
		return u, nil
	}
	return "", &Error{Status: http.StatusBadRequest, Message: "user " + u + ` does not exist: the sandbox has "user" and "root"`}
}
