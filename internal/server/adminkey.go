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
	if data, err := os.ReadFile(path); err == nil {
		key = strings.TrimSpace(string(data))
		sum := sha256.Sum256([]byte(key))
		if _, err := st.KeyByHash(ctx, sum[:]); err == nil {
			return key, false, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	var b [24]byte
	rand.Read(b[:])
	key = "wr_" + base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(key))
	now := time.Now().UTC()
	if _, err := st.GetAccount(ctx, DefaultAccount); err != nil {
		if err := st.PutAccount(ctx, store.Account{ID: DefaultAccount, Name: DefaultAccount, CreatedAt: now}); err != nil {
			return "", false, err
		}
	}
	if err := st.PutKey(ctx, store.Key{ID: "key_admin", Account: DefaultAccount, Kind: store.KeyAdmin, Hash: sum[:], Name: "admin", CreatedAt: now}); err != nil {
		return "", false, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(key+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("writing admin key: %w", err)
	}
	return key, true, os.Rename(tmp, path)
}
