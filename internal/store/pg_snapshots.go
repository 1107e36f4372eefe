package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// PutSnapshot implements Snapshots.
func (p *Postgres) PutSnapshot(ctx context.Context, s *sandbox.Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding snapshot %s: %w", s.ID, err)
	}
	_, err = p.pool.Exec(ctx, "INSERT INTO snapshots (id, account, created_at, expires_at, snapshot) VALUES ($1, $2, $3, $4, $5)",
		s.ID, s.Account, s.CreatedAt, s.ExpiresAt, data)
	if pgCode(err) == pgUniqueViolation {
		return sandbox.Wrap(sandbox.KindConflict, err, fmt.Sprintf("snapshot %s exists", s.ID))
	}
	return dataError(err, "snapshot "+s.ID)
}

// GetSnapshot implements Snapshots.
func (p *Postgres) GetSnapshot(ctx context.Context, id string) (*sandbox.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if storable(id) {
		out, err := p.snapshots(ctx, "SELECT snapshot FROM snapshots WHERE id = $1", id)
		if err != nil {
			return nil, err
		}
		if len(out) == 1 {
			return out[0], nil
		}
	}
	return nil, sandbox.Errorf(sandbox.KindNotFound, "snapshot %s not found", id)
}

// ListSnapshots implements Snapshots.
func (p *Postgres) ListSnapshots(ctx context.Context, account string) ([]*sandbox.Snapshot, error) {
	if account == "" {
		return p.snapshots(ctx, "SELECT snapshot FROM snapshots ORDER BY created_at DESC, id")
	}
	if !storable(account) {
		return nil, nil
	}
	return p.snapshots(ctx, "SELECT snapshot FROM snapshots WHERE account = $1 ORDER BY created_at DESC, id", account)
}

// ExpiredSnapshots implements Snapshots.
func (p *Postgres) ExpiredSnapshots(ctx context.Context, now time.Time) ([]*sandbox.Snapshot, error) {
	return p.snapshots(ctx, "SELECT snapshot FROM snapshots WHERE expires_at <= $1 ORDER BY created_at DESC, id", now)
}

// DeleteSnapshot implements Snapshots.
func (p *Postgres) DeleteSnapshot(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storable(id) {
		return nil
	}
	_, err := p.pool.Exec(ctx, "DELETE FROM snapshots WHERE id = $1", id)
	return dataError(err, "snapshot "+id)
}

func (p *Postgres) snapshots(ctx context.Context, sql string, args ...any) ([]*sandbox.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, dataError(err, "the snapshot query")
	}
	defer rows.Close()
	var out []*sandbox.Snapshot
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		s := new(sandbox.Snapshot)
		if err := json.Unmarshal(data, s); err != nil {
			return nil, fmt.Errorf("decoding a snapshot: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// BillSnapshot implements Snapshots.
func (p *Postgres) BillSnapshot(ctx context.Context, id string, from, until time.Time, delta UsageDelta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storable(id) {
		return sandbox.Errorf(sandbox.KindNotFound, "snapshot %s not found", id)
	}
	if !delta.Empty() && delta.Day == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "usage delta needs a day")
	}
	return p.inTx(ctx, func(tx pgx.Tx) error {
		var data []byte
		err := tx.QueryRow(ctx, "SELECT snapshot FROM snapshots WHERE id = $1 FOR UPDATE", id).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return sandbox.Errorf(sandbox.KindNotFound, "snapshot %s not found", id)
		}
		if err != nil {
			return dataError(err, "snapshot "+id)
		}
		s := new(sandbox.Snapshot)
		if err := json.Unmarshal(data, s); err != nil {
			return fmt.Errorf("decoding snapshot %s: %w", id, err)
		}
		next, err := billed(s, from, until)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE snapshots SET snapshot = $2 WHERE id = $1", id, next); err != nil {
			return dataError(err, "snapshot "+id)
		}
		if delta.Empty() {
			return nil
		}
		return addUsage(ctx, tx, delta)
	})
}
