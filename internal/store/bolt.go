package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Bucket names. Each holds JSON values keyed by ID, except keyHashes, which
// maps a key's hash to its ID.
var (
	bucketSandboxes = []byte("sandboxes")
	bucketKeys      = []byte("keys")
	bucketKeyHashes = []byte("key_hashes")
	bucketKeysGone  = []byte("removed_keys") // removed keys, without their hash
	bucketAccounts  = []byte("accounts")
	bucketUsage     = []byte("usage")   // key: day \x00 account \x00 key id
	bucketSecrets   = []byte("secrets") // key: account \x00 name
	bucketNodes     = []byte("nodes")
	bucketValues    = []byte("values")
)

// lockTimeout bounds the wait for bbolt's file lock, so that a second server
// on the same data dir fails at once instead of hanging.
const lockTimeout = time.Second

// Bolt is the embedded Store: one bbolt file.
type Bolt struct {
	db    *bolt.DB
	locks locks
	// events is the EventSource of SetEventSource (nil: none).
	events atomic.Pointer[EventSource]
}

var _ Store = (*Bolt)(nil)

// OpenBolt opens the database at path, making it (mode 0600) if absent.
func OpenBolt(path string) (*Bolt, error) {
	return OpenBoltWith(path, BoltOptions{})
}

// BoltOptions are the embedded store's settings besides its file. The zero
// value is what a server runs with.
type BoltOptions struct {
	// NoSync skips the flush to disk of each commit, which otherwise costs
	// a few milliseconds a write: a crash of the machine may lose or
	// corrupt the file. For tests only (storetest), whose files die with
	// them.
	NoSync bool
}

// OpenBoltWith is OpenBolt with options.
func OpenBoltWith(path string, o BoltOptions) (*Bolt, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, NoSync: o.NoSync})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("opening %s: locked by another process (is another server using this data dir?)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketSandboxes, bucketKeys, bucketKeyHashes, bucketKeysGone, bucketAccounts, bucketUsage, bucketSecrets, bucketNodes, bucketValues, bucketTemplates, bucketTemplateNames, bucketTemplatesPublic, bucketEvents, bucketWebhooks, bucketDeliveries, bucketAudit, bucketSnapshots, bucketVolumes} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("making bucket %s: %w", b, err)
			}
		}
		return indexLive(tx)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return &Bolt{db: db}, nil
}

// Close releases the file and its lock.
func (b *Bolt) Close() error { return b.db.Close() }

// PutSandbox inserts r or replaces the stored record of r's version
// (bolt_cas.go).
func (b *Bolt) PutSandbox(ctx context.Context, r *sandbox.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r == nil || r.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "sandbox record needs an id")
	}
	return b.update(r, func(tx *bolt.Tx) error { return b.casSandboxTx(tx, r) })
}

// GetSandbox returns the record with id.
func (b *Bolt) GetSandbox(ctx context.Context, id string) (*sandbox.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var r sandbox.Record
	found, err := b.get(bucketSandboxes, id, &r)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	return &r, nil
}

// ListSandboxes returns the records that pass f, oldest first.
func (b *Bolt) ListSandboxes(ctx context.Context, f SandboxFilter) ([]*sandbox.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []*sandbox.Record
	err := b.db.View(func(tx *bolt.Tx) error {
		return forEachSandbox(tx, f, func(k, v []byte) error {
			r := new(sandbox.Record)
			if err := json.Unmarshal(v, r); err != nil {
				return fmt.Errorf("decoding sandbox %s: %w", k, err)
			}
			if f.Match(r) {
				out = append(out, r)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sortRecords(out)
	return out, nil
}

// DeleteSandbox removes the record with id.
func (b *Bolt) DeleteSandbox(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketSandboxes)
		if bk.Get([]byte(id)) == nil {
			return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
		}
		if err := tx.Bucket(bucketLive).Delete([]byte(id)); err != nil {
			return err
		}
		return bk.Delete([]byte(id))
	})
}

// PutKey inserts or replaces k and indexes it by its hash.
func (b *Bolt) PutKey(ctx context.Context, k Key) error {
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
	return b.db.Update(func(tx *bolt.Tx) error { return putKeyTx(tx, k, v) })
}

// putKeyTx stores k (encoded as v) and its hash index entry, in tx.
func putKeyTx(tx *bolt.Tx, k Key, v []byte) error {
	keys, hashes := tx.Bucket(bucketKeys), tx.Bucket(bucketKeyHashes)
	if owner := hashes.Get(k.Hash); owner != nil && string(owner) != k.ID {
		return sandbox.Errorf(sandbox.KindConflict, "key %s: another key has the same secret", k.ID)
	}
	if old := keys.Get([]byte(k.ID)); old != nil {
		var prev Key
		if err := json.Unmarshal(old, &prev); err != nil {
			return fmt.Errorf("decoding key %s: %w", k.ID, err)
		}
		if !bytes.Equal(prev.Hash, k.Hash) {
			if err := hashes.Delete(prev.Hash); err != nil {
				return err
			}
		}
	}
	if err := hashes.Put(k.Hash, []byte(k.ID)); err != nil {
		return err
	}
	return keys.Put([]byte(k.ID), v)
}

// KeyByHash returns the key whose secret hashes to hash.
func (b *Bolt) KeyByHash(ctx context.Context, hash []byte) (*Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var k *Key
	err := b.db.View(func(tx *bolt.Tx) error {
		if len(hash) == 0 {
			return nil
		}
		id := tx.Bucket(bucketKeyHashes).Get(hash)
		if id == nil {
			return nil
		}
		v := tx.Bucket(bucketKeys).Get(id)
		if v == nil {
			return fmt.Errorf("key index names missing key %s", id)
		}
		k = new(Key)
		if err := json.Unmarshal(v, k); err != nil {
			return fmt.Errorf("decoding key %s: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "key not found")
	}
	return k, nil
}

// ListKeys returns the keys of account (every key when it is empty),
// oldest first.
func (b *Bolt) ListKeys(ctx context.Context, account string) ([]Key, error) {
	return b.listKeys(ctx, account, bucketKeys)
}

// ListAllKeys returns the keys of account, removed ones included, oldest
// first.
func (b *Bolt) ListAllKeys(ctx context.Context, account string) ([]Key, error) {
	return b.listKeys(ctx, account, bucketKeys, bucketKeysGone)
}

func (b *Bolt) listKeys(ctx context.Context, account string, buckets ...[]byte) ([]Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Key
	err := b.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = keysTx(tx, account, buckets...)
		return err
	})
	return out, err
}

// DeleteKey removes the key with id and every key made through it, in one
// transaction; their secrets stop working at once. Each is kept, without
// its hash, in the removed keys.
func (b *Bolt) DeleteKey(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error { return deleteKeyTx(tx, id) })
}

// deleteKeyTx is DeleteKey in tx.
func deleteKeyTx(tx *bolt.Tx, id string) error {
	keys := tx.Bucket(bucketKeys)
	if keys.Get([]byte(id)) == nil {
		return sandbox.Errorf(sandbox.KindNotFound, "key %s not found", id)
	}
	var all []Key
	err := keys.ForEach(func(kid, v []byte) error {
		var k Key
		if err := json.Unmarshal(v, &k); err != nil {
			return fmt.Errorf("decoding key %s: %w", kid, err)
		}
		all = append(all, k)
		return nil
	})
	if err != nil {
		return err
	}
	tree := NewKeyTree(all)
	now := time.Now().UTC()
	for _, kid := range tree.Subtree(id) {
		k, _ := tree.Key(kid)
		if err := tx.Bucket(bucketKeyHashes).Delete(k.Hash); err != nil {
			return err
		}
		if err := keys.Delete([]byte(kid)); err != nil {
			return err
		}
		k.Hash, k.RemovedAt = nil, &now
		v, err := json.Marshal(k)
		if err != nil {
			return fmt.Errorf("encoding key %s: %w", kid, err)
		}
		if err := tx.Bucket(bucketKeysGone).Put([]byte(kid), v); err != nil {
			return err
		}
	}
	return nil
}

// PutAccount inserts or replaces a.
func (b *Bolt) PutAccount(ctx context.Context, a Account) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "account needs an id")
	}
	return b.put(bucketAccounts, a.ID, a)
}

// GetAccount returns the account with id.
func (b *Bolt) GetAccount(ctx context.Context, id string) (*Account, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var a Account
	found, err := b.get(bucketAccounts, id, &a)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "account %s not found", id)
	}
	return &a, nil
}

// ListAccounts returns every account, oldest first.
func (b *Bolt) ListAccounts(ctx context.Context) ([]Account, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Account
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAccounts).ForEach(func(id, v []byte) error {
			var a Account
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("decoding account %s: %w", id, err)
			}
			out = append(out, a)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(x, y Account) int {
		if c := x.CreatedAt.Compare(y.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return out, nil
}

func (b *Bolt) put(bucket []byte, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s %s: %w", bucket, id, err)
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put([]byte(id), data)
	})
}

// get decodes the value of id into v and reports whether it was there.
func (b *Bolt) get(bucket []byte, id string, v any) (bool, error) {
	var found bool
	err := b.db.View(func(tx *bolt.Tx) error {
		// Bytes from Get live only during the transaction; Unmarshal copies.
		data := tx.Bucket(bucket).Get([]byte(id))
		if data == nil {
			return nil
		}
		found = true
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("decoding %s %s: %w", bucket, id, err)
		}
		return nil
	})
	return found, err
}
