package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// bucketSnapshots holds the snapshots' records by id. An account holds
// few, so a list reads them all.
var bucketSnapshots = []byte("snapshots")

// PutSnapshot implements Snapshots.
func (b *Bolt) PutSnapshot(ctx context.Context, s *sandbox.Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketSnapshots)
		if bk.Get([]byte(s.ID)) != nil {
			return sandbox.Errorf(sandbox.KindConflict, "snapshot %s exists", s.ID)
		}
		return bk.Put([]byte(s.ID), v)
	})
}

// GetSnapshot implements Snapshots.
func (b *Bolt) GetSnapshot(ctx context.Context, id string) (*sandbox.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *sandbox.Snapshot
	err := b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketSnapshots).Get([]byte(id))
		if v == nil {
			return sandbox.Errorf(sandbox.KindNotFound, "snapshot %s not found", id)
		}
		out = new(sandbox.Snapshot)
		return json.Unmarshal(v, out)
	})
	return out, err
}

// ListSnapshots implements Snapshots.
func (b *Bolt) ListSnapshots(ctx context.Context, account string) ([]*sandbox.Snapshot, error) {
	return b.snapshotsWhere(ctx, func(s *sandbox.Snapshot) bool { return account == "" || s.Account == account })
}

// ExpiredSnapshots implements Snapshots.
func (b *Bolt) ExpiredSnapshots(ctx context.Context, now time.Time) ([]*sandbox.Snapshot, error) {
	return b.snapshotsWhere(ctx, func(s *sandbox.Snapshot) bool { return !s.ExpiresAt.After(now) })
}

func (b *Bolt) snapshotsWhere(ctx context.Context, keep func(*sandbox.Snapshot) bool) ([]*sandbox.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []*sandbox.Snapshot
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSnapshots).ForEach(func(k, v []byte) error {
			s := new(sandbox.Snapshot)
			if err := json.Unmarshal(v, s); err != nil {
				return fmt.Errorf("decoding snapshot %s: %w", k, err)
			}
			if keep(s) {
				out = append(out, s)
			}
			return nil
		})
	})
	sortSnapshots(out)
	return out, err
}

// sortSnapshots orders newest first, then by id.
func sortSnapshots(s []*sandbox.Snapshot) {
	slices.SortFunc(s, func(a, b *sandbox.Snapshot) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// DeleteSnapshot implements Snapshots.
func (b *Bolt) DeleteSnapshot(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSnapshots).Delete([]byte(id))
	})
}

// BillSnapshot implements Snapshots.
func (b *Bolt) BillSnapshot(ctx context.Context, id string, from, until time.Time, delta UsageDelta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketSnapshots)
		v := bk.Get([]byte(id))
		if v == nil {
			return sandbox.Errorf(sandbox.KindNotFound, "snapshot %s not found", id)
		}
		s := new(sandbox.Snapshot)
		if err := json.Unmarshal(v, s); err != nil {
			return fmt.Errorf("decoding snapshot %s: %w", id, err)
		}
		next, err := billed(s, from, until)
		if err != nil {
			return err
		}
		if err := bk.Put([]byte(id), next); err != nil {
			return err
		}
		return addUsageTx(tx, delta)
	})
}
