package store

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// RecordUsage replaces r (if it has the stored version) and adds delta to
// its ledger row, atomically.
func (b *Bolt) RecordUsage(ctx context.Context, r *sandbox.Record, delta UsageDelta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r == nil || r.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "sandbox record needs an id")
	}
	return b.update(r, func(tx *bolt.Tx) error {
		// The version check comes first: a stale bill changes nothing.
		if err := b.casSandboxTx(tx, r); err != nil {
			return err
		}
		return addUsageTx(tx, delta)
	})
}

// addUsageTx adds delta (if any) to its ledger row in tx.
func addUsageTx(tx *bolt.Tx, delta UsageDelta) error {
	if delta.Empty() {
		return nil
	}
	if delta.Day == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "usage delta needs a day")
	}
	bk := tx.Bucket(bucketUsage)
	key := []byte(delta.Day + "\x00" + delta.Account + "\x00" + delta.KeyID)
	row := UsageRow{Day: delta.Day, Account: delta.Account, KeyID: delta.KeyID}
	if v := bk.Get(key); v != nil {
		if err := json.Unmarshal(v, &row); err != nil {
			return fmt.Errorf("decoding usage row: %w", err)
		}
	}
	row.AliveMs += delta.AliveMs
	row.MemoryMiBMs += delta.MemoryMiBMs
	row.CPUNs += delta.CPUNs
	row.CostNanos += delta.CostNanos
	v, err := json.Marshal(row)
	if err != nil {
		return err
	}
	return bk.Put(key, v)
}

// Usage returns the ledger rows that pass f, ordered by day, account, key.
func (b *Bolt) Usage(ctx context.Context, f UsageFilter) ([]UsageRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []UsageRow
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketUsage).Cursor()
		k, v := c.First()
		if f.From != "" {
			k, v = c.Seek([]byte(f.From))
		}
		for ; k != nil; k, v = c.Next() {
			var row UsageRow
			if err := json.Unmarshal(v, &row); err != nil {
				return fmt.Errorf("decoding usage row: %w", err)
			}
			if f.To != "" && row.Day > f.To {
				break
			}
			if f.Match(row) {
				out = append(out, row)
			}
		}
		return nil
	})
	return out, err
}
