package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/e2bcompat"
	"github.com/withruntime/withruntime/internal/httpapi"
	"github.com/withruntime/withruntime/internal/store"
)

// e2bSecret returns the secret that seals the E2B access tokens of the
// data dir, making it on the first start (DIR/e2b.key, 32 random bytes,
// mode 0600, on disk before it is used: a token made under a secret a
// crash lost would be void). A new secret voids every token made under
// the old one. An e2b.key that is not a regular file of 32 bytes, or that
// others may read or write, is refused: what they read forges tokens.
func e2bSecret(dataDir string) ([]byte, error) {
	return dataSecret(filepath.Join(dataDir, "e2b.key"))
}

// dataSecret reads the secret at path, making it first if there is none
// (as e2bSecret says).
func dataSecret(path string) ([]byte, error) {
	b, err := readSecret(path)
	if !errors.Is(err, os.ErrNotExist) {
		return b, err
	}
	b = make([]byte, e2bcompat.SecretSize)
	rand.Read(b)
	if err := writeSecret(path, b); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return b, nil
}

// readSecret reads the secret at path, which must be private.
func readSecret(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link: want the key file itself (remove it to make a new one)", path)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file (remove it to make a new one)", path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%s has mode %04o: others may have read the secret that seals E2B tokens; remove it to make a new one (its tokens are then void), or chmod 600 it if nobody did",
			path, fi.Mode().Perm())
	case fi.Size() != e2bcompat.SecretSize:
		return nil, fmt.Errorf("%s is %d bytes, want %d (remove it to make a new one)", path, fi.Size(), e2bcompat.SecretSize)
	}
	b := make([]byte, e2bcompat.SecretSize)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// writeSecret writes b to path, private and synced, through a temporary
// file made afresh (a leftover one's mode would stay) and renamed over it.
func writeSecret(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// listenE2B serves E2B's protocol on cfg.E2BListen, translated onto api
// (the API's handler, called in-process), with the API listener's
// connection bounds (the two share the descriptor budget, listenLimit).
// Its in-process requests go through admission.OnBehalf: a request whose
// key or token the API accepted has its connection spared under that
// account as a direct API request has, and an account has at most its
// share of in-process requests at once.
func listenE2B(cfg Config, dataDir string, st store.Store, api http.Handler, wrap func(http.Handler) http.Handler) (*http.Server, net.Listener, error) {
	secret, err := e2bSecret(dataDir)
	if err != nil {
		return nil, nil, err
	}
	return listenE2BWith(cfg, secret, filepath.Join(dataDir, "e2b-uploads"), st, api, wrap)
}

// listenE2BWith is listenE2B with the tokens' secret given (a many-host
// installation keeps it in the store), and the directory where template
// builds' uploads wait ("" a temporary one). The layer's bounds per account
// count under the account of each request's key, as st says.
func listenE2BWith(cfg Config, secret []byte, uploadDir string, st store.Store, api http.Handler, wrap func(http.Handler) http.Handler) (*http.Server, net.Listener, error) {
	limit, err := listenLimit(cfg)
	if err != nil {
		return nil, nil, err
	}
	e2b, err := e2bcompat.New(e2bcompat.Config{
		API: admission.OnBehalf(api), Secret: secret, Domain: cfg.E2BDomain, Log: cfg.Logger, NoInternetByDefault: cfg.E2BNoInternet,
		Memory: cfg.agentBudget(), Accounts: httpapi.KeyAccounts(st), UploadDir: uploadDir,
		Preview: func(w http.ResponseWriter, r *http.Request, id string, port int) {
			httpapi.ServePreview(api, w, r, id, port)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	nl, err := net.Listen("tcp", cfg.E2BListen)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s: %w", cfg.E2BListen, err)
	}
	l := admission.Listen(nl, admission.ConnLimits{MaxConns: limit, Logger: cfg.Logger})
	// Started: the E2B handler is not the API's, which notes by itself that a
	// request's headers are in (a large upload is no header); and it marks
	// the request OnBehalf's in-process requests spare.
	return l.HTTPServer(wrap(admission.Started(e2b))), l, nil
}
