package store

import (
	"bytes"
	"context"
	"encoding/json"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// bucketVolumes holds the volumes keyed account \x00 name.
var bucketVolumes = []byte("volumes")

// PutVolume inserts v.
func (b *Bolt) PutVolume(ctx context.Context, v Volume) error {
	data, err := encodeVolume(ctx, v)
	if err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketVolumes)
		key := secretKey(v.Account, v.Name)
		if bk.Get(key) != nil {
			return sandbox.Errorf(sandbox.KindConflict, "a volume named %s exists", v.Name)
		}
		var dup bool
		bk.ForEach(func(_, val []byte) error {
			var o Volume
			if json.Unmarshal(val, &o) == nil && o.ID == v.ID {
				dup = true
			}
			return nil
		})
		if dup {
			return sandbox.Errorf(sandbox.KindConflict, "volume %s exists", v.ID)
		}
		return bk.Put(key, data)
	})
}

// GetVolume returns account's volume name.
func (b *Bolt) GetVolume(ctx context.Context, account, name string) (*Volume, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var v *Volume
	err := b.db.View(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucketVolumes).Get(secretKey(account, name))
		if data == nil {
			return volumeNotFound(name)
		}
		var err error
		v, err = decode[Volume]("volume", name, data)
		return err
	})
	return v, err
}

// ListVolumes returns account's volumes by name.
func (b *Bolt) ListVolumes(ctx context.Context, account string) ([]Volume, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var prefix []byte
	if account != "" {
		prefix = []byte(account + "\x00")
	}
	var out []Volume
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketVolumes).Cursor()
		for k, data := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, data = c.Next() {
			v, err := decode[Volume]("volume", string(k), data)
			if err != nil {
				return err
			}
			out = append(out, *v)
		}
		return nil
	})
	return out, err
}

// DeleteVolume removes account's volume name.
func (b *Bolt) DeleteVolume(ctx context.Context, account, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketVolumes)
		key := secretKey(account, name)
		if bk.Get(key) == nil {
			return volumeNotFound(name)
		}
		return bk.Delete(key)
	})
}
