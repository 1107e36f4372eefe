package store

import (
	"bytes"
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// InitValue stores value under name unless one is there, and returns the
// stored one.
func (b *Bolt) InitValue(ctx context.Context, name string, value []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkValue(name, value); err != nil {
		return nil, err
	}
	var out []byte
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketValues)
		if v := bk.Get([]byte(name)); v != nil {
			out = bytes.Clone(v) // bbolt's bytes live only during tx
			return nil
		}
		out = bytes.Clone(value)
		return bk.Put([]byte(name), out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func checkValue(name string, value []byte) error {
	switch {
	case name == "":
		return sandbox.Errorf(sandbox.KindInvalid, "value needs a name")
	case len(value) == 0:
		return sandbox.Errorf(sandbox.KindInvalid, "value %s must not be empty", name)
	}
	return nil
}

// TryLock takes the lock name in this process: a bbolt file has one
// process.
func (b *Bolt) TryLock(ctx context.Context, name string) (func(), bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	unlock, ok := b.locks.try(name)
	return unlock, ok, nil
}
