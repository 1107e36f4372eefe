package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/withruntime/withruntime/internal/e2bcompat"
	"github.com/withruntime/withruntime/internal/httpapi"
)

// e2bSecret returns the secret that seals the E2B access tokens of the
// data dir, making it on the first start (DIR/e2b.key, 32 random bytes,
// mode 0600). A new secret voids every token made under the old one.
func e2bSecret(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, "e2b.key")
	b, err := os.ReadFile(path)
	switch {
	case err == nil && len(b) == e2bcompat.SecretSize:
		return b, nil
	case err == nil:
		return nil, fmt.Errorf("%s is %d bytes, want %d (remove it to make a new one)", path, len(b), e2bcompat.SecretSize)
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	b = make([]byte, e2bcompat.SecretSize)
	rand.Read(b)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, fmt.Errorf("writing the E2B key: %w", err)
	}
	return b, os.Rename(tmp, path)
}

// listenE2B serves E2B's protocol on cfg.E2BListen, translated onto api
// (the API's handler, called in-process), with the API listener's
// connection bounds (the two share the descriptor budget, listenLimit).
// Its in-process requests go through httpapi.OnBehalf: a request whose
// key or token the API accepted has its connection spared under that
// account as a direct API request has, and an account has at most its
// share of in-process requests at once.
func listenE2B(cfg Config, dataDir string, api http.Handler, wrap func(http.Handler) http.Handler) (*http.Server, net.Listener, error) {
	limit, err := listenLimit(cfg)
	if err != nil {
		return nil, nil, err
	}
	secret, err := e2bSecret(dataDir)
	if err != nil {
		return nil, nil, err
	}
	e2b, err := e2bcompat.New(e2bcompat.Config{
		API: httpapi.OnBehalf(api), Secret: secret, Domain: cfg.E2BDomain, Log: cfg.Logger,
	})
	if err != nil {
		return nil, nil, err
	}
	nl, err := net.Listen("tcp", cfg.E2BListen)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s: %w", cfg.E2BListen, err)
	}
	l := httpapi.Listen(nl, httpapi.ConnLimits{MaxConns: limit, Logger: cfg.Logger})
	// Started: the E2B handler is not the API's, which notes by itself that a
	// request's headers are in (a large upload is no header); and it marks
	// the request OnBehalf's in-process requests spare.
	return l.HTTPServer(wrap(httpapi.Started(e2b))), l, nil
}
