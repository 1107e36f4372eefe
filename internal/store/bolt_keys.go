package store

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// PutKeyIf stores k if check accepts the keys of k's account, in one
// transaction.
func (b *Bolt) PutKeyIf(ctx context.Context, k Key, check func(keys []Key) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKey(k); err != nil {
		return err
	}
	v, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("encoding key %s: %w", k.ID, err)
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		keys, err := keysTx(tx, k.Account)
		if err != nil {
			return err
		}
		if err := check(keys); err != nil {
			return err
		}
		return putKeyTx(tx, k, v)
	})
}

// DeleteKeyIf is DeleteKey once check accepts the keys of account (every
// key when it is ""), in one transaction.
func (b *Bolt) DeleteKeyIf(ctx context.Context, id, account string, check func(keys []Key) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		keys, err := keysTx(tx, account)
		if err != nil {
			return err
		}
		if err := check(keys); err != nil {
			return err
		}
		return deleteKeyTx(tx, id)
	})
}

// keysTx reads the keys of account (every key when it is "") from
// buckets (bucketKeys when none) in tx, oldest first.
func keysTx(tx *bolt.Tx, account string, buckets ...[]byte) ([]Key, error) {
	if len(buckets) == 0 {
		buckets = [][]byte{bucketKeys}
	}
	var out []Key
	for _, bk := range buckets {
		err := tx.Bucket(bk).ForEach(func(id, v []byte) error {
			var k Key
			if err := json.Unmarshal(v, &k); err != nil {
				return fmt.Errorf("decoding key %s: %w", id, err)
			}
			if account == "" || k.Account == account {
				out = append(out, k)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sortKeys(out)
	return out, nil
}

// CreateAccount stores a unless an account with its id or name exists, in
// one transaction.
func (b *Bolt) CreateAccount(ctx context.Context, a Account) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "account needs an id")
	}
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encoding account %s: %w", a.ID, err)
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketAccounts)
		if bk.Get([]byte(a.ID)) != nil {
			return sandbox.Errorf(sandbox.KindConflict, "account %s already exists", a.ID)
		}
		if a.Name != "" {
			err := bk.ForEach(func(id, v []byte) error {
				var other Account
				if err := json.Unmarshal(v, &other); err != nil {
					return fmt.Errorf("decoding account %s: %w", id, err)
				}
				if other.Name == a.Name {
					return sandbox.Errorf(sandbox.KindConflict, "an account named %s already exists", a.Name)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return bk.Put([]byte(a.ID), data)
	})
}
