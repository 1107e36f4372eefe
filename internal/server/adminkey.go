package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/store"
)

// DefaultAccount owns the admin key of the first start.
const DefaultAccount = "default"

// adminKey returns the admin key of the data dir, making it on the first
// start (written to DIR/admin.key, mode 0600). made says whether it is new.
func adminKey(ctx context.Context, st store.Store, dataDir string) (key string, made bool, err error) {
	path := filepath.Join(dataDir, "admin.key")
	if key, ok, err := knownKey(ctx, st, path); ok || err != nil {
		return key, false, err
	}
	key, sum := newAdminSecret()
	now := time.Now().UTC()
	if _, err := st.GetAccount(ctx, DefaultAccount); err != nil {
		if err := st.PutAccount(ctx, store.Account{ID: DefaultAccount, Name: DefaultAccount, CreatedAt: now}); err != nil {
			return "", false, err
		}
	}
	if err := st.PutKey(ctx, firstAdminKey(sum, now)); err != nil {
		return "", false, err
	}
	return key, true, writeKeyFile(path, key)
}

// knownKey reads the admin key file at path and reports whether the store
// knows that key (a missing file is not an error).
func knownKey(ctx context.Context, st store.Store, path string) (string, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	key := strings.TrimSpace(string(data))
	sum := sha256.Sum256([]byte(key))
	if _, err := st.KeyByHash(ctx, sum[:]); err != nil {
		return "", false, nil
	}
	return key, true, nil
}

// newAdminSecret makes an admin key's secret and its hash.
func newAdminSecret() (string, [32]byte) {
	var b [24]byte
	rand.Read(b[:])
	key := "wr_" + base64.RawURLEncoding.EncodeToString(b[:])
	return key, sha256.Sum256([]byte(key))
}

// firstAdminKey is the key record of the first start's admin key.
func firstAdminKey(sum [32]byte, now time.Time) store.Key {
	return store.Key{ID: "key_admin", Account: DefaultAccount, Kind: store.KeyAdmin, Hash: sum[:], Name: "admin", CreatedAt: now}
}

// writeKeyFile writes key to path (mode 0600) through a temporary file.
func writeKeyFile(path, key string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing admin key: %w", err)
	}
	return os.Rename(tmp, path)
}
