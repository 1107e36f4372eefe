package store

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// storedVersion is the part of a stored record the version check reads.
type storedVersion struct {
	Version int64 `json:"version"`
}

// casSandboxTx writes r if the stored record still has r's version (or,
// for version 0, does not exist), bumping r.Version, and appends the
// event of the change (SetEventSource); in tx. A failed transaction
// leaves r.Version as it was.
func (b *Bolt) casSandboxTx(tx *bolt.Tx, r *sandbox.Record) error {
	old := tx.Bucket(bucketSandboxes).Get([]byte(r.ID))
	if err := checkVersion(r, old); err != nil {
		return err
	}
	r.Version++
	data, err := json.Marshal(r)
	if err != nil {
		r.Version--
		return fmt.Errorf("encoding sandbox %s: %w", r.ID, err)
	}
	if err := putSandboxTx(tx, r, data); err != nil {
		return err
	}
	return b.sandboxEventTx(tx, old, r)
}

// checkVersion reports ErrStale unless old (the stored JSON, nil when
// absent) may be replaced by r: r.Version is 0 and nothing is stored, or
// it is the stored version. Records stored before versions existed read
// as version 0 and so stay writable by who read them.
func checkVersion(r *sandbox.Record, old []byte) error {
	if old == nil {
		if r.Version != 0 {
			return fmt.Errorf("sandbox %s is gone: %w", r.ID, ErrStale)
		}
		return nil
	}
	var v storedVersion
	if err := json.Unmarshal(old, &v); err != nil {
		return fmt.Errorf("decoding sandbox %s: %w", r.ID, err)
	}
	switch {
	case v.Version == r.Version:
		return nil
	case r.Version == 0:
		return fmt.Errorf("sandbox %s exists: %w", r.ID, ErrStale)
	}
	return fmt.Errorf("sandbox %s is at version %d, not %d: %w", r.ID, v.Version, r.Version, ErrStale)
}

// update runs fn in a write transaction for r and restores r.Version when
// the transaction does not commit.
func (b *Bolt) update(r *sandbox.Record, fn func(tx *bolt.Tx) error) error {
	v := r.Version
	err := b.db.Update(fn)
	if err != nil {
		r.Version = v
	}
	return err
}

// AdmitSandbox writes r like PutSandbox unless its account already has
// limit live records other than r.
func (b *Bolt) AdmitSandbox(ctx context.Context, r *sandbox.Record, limit int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r == nil || r.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "sandbox record needs an id")
	}
	return b.update(r, func(tx *bolt.Tx) error {
		if limit > 0 {
			n, err := countLive(tx, r.Account, r.ID)
			if err != nil {
				return err
			}
			if n >= limit {
				return concurrencyError(r.Account, n)
			}
		}
		return b.casSandboxTx(tx, r)
	})
}

// countLive counts the live (starting or running) records of account other
// than except, through the live index.
func countLive(tx *bolt.Tx, account, except string) (int, error) {
	all := tx.Bucket(bucketSandboxes)
	n := 0
	err := tx.Bucket(bucketLive).ForEach(func(k, _ []byte) error {
		if string(k) == except {
			return nil
		}
		v := all.Get(k)
		if v == nil {
			return nil
		}
		var r struct {
			Account string        `json:"account"`
			State   sandbox.State `json:"state"`
		}
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decoding sandbox %s: %w", k, err)
		}
		if r.Account == account && (r.State == sandbox.StateStarting || r.State == sandbox.StateRunning) {
			n++
		}
		return nil
	})
	return n, err
}

func concurrencyError(account string, running int) error {
	return sandbox.Errorf(sandbox.KindConcurrency, "account %s runs %d sandboxes, its limit", account, running)
}
