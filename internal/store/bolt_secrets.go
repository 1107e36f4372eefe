package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// secretKey is the key of a secret in bucketSecrets. Neither part may hold
// a NUL byte, so that one account's prefix never matches another's.
func secretKey(account, name string) []byte {
	return []byte(account + "\x00" + name)
}

func checkSecretID(account, name string) error {
	switch {
	case account == "" || strings.IndexByte(account, 0) >= 0:
		return sandbox.Errorf(sandbox.KindInvalid, "secret needs an account without NUL bytes")
	case name == "" || strings.IndexByte(name, 0) >= 0:
		return sandbox.Errorf(sandbox.KindInvalid, "secret needs a name without NUL bytes")
	}
	return nil
}

// PutSecret inserts or replaces s.
func (b *Bolt) PutSecret(ctx context.Context, s Secret) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSecretID(s.Account, s.Name); err != nil {
		return err
	}
	if len(s.Nonce) == 0 || len(s.Ciphertext) == 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "secret %s needs a nonce and a ciphertext", s.Name)
	}
	v, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding secret %s: %w", s.Name, err)
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSecrets).Put(secretKey(s.Account, s.Name), v)
	})
}

// ListSecrets returns the secrets of account, by name.
func (b *Bolt) ListSecrets(ctx context.Context, account string) ([]Secret, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if account == "" || strings.IndexByte(account, 0) >= 0 {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "listing secrets needs an account without NUL bytes")
	}
	prefix := []byte(account + "\x00")
	var out []Secret
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSecrets).Cursor()
		// Keys sort bytewise, so the account's secrets are one run, by name.
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var s Secret
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("decoding secret %q: %w", k[len(prefix):], err)
			}
			out = append(out, s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteSecret removes the secret name of account.
func (b *Bolt) DeleteSecret(ctx context.Context, account, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSecretID(account, name); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketSecrets)
		key := secretKey(account, name)
		if bk.Get(key) == nil {
			return sandbox.Errorf(sandbox.KindNotFound, "secret %s not found", name)
		}
		return bk.Delete(key)
	})
}
