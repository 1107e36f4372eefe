package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// PutSandbox writes r if the stored record still has r's version (for
// version 0: if there is none).
func (p *Postgres) PutSandbox(ctx context.Context, r *sandbox.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r == nil || r.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "sandbox record needs an id")
	}
	return p.writeSandbox(ctx, r, nil, nil)
}

// writeSandbox is the conditional write of r in one transaction: first
// before (nil: none), then the write, then after (nil: none), and last
// the event of the change (SetEventSource). On success r.Version is the
// new version; otherwise r is as it was.
func (p *Postgres) writeSandbox(ctx context.Context, r *sandbox.Record, before, after func(tx pgx.Tx) error) error {
	var next int64
	err := p.sourced(ctx, func(tx pgx.Tx, src *EventSource, appended *bool) error {
		if before != nil {
			if err := before(tx); err != nil {
				return err
			}
		}
		prev, err := prevSandbox(ctx, tx, src, r)
		if err != nil {
			return err
		}
		if next, err = casSandbox(ctx, tx, r); err != nil {
			return err
		}
		if after != nil {
			if err := after(tx); err != nil {
				return err
			}
		}
		return sandboxEventPG(ctx, tx, src, prev, r, next, appended)
	})
	if err != nil {
		return err
	}
	r.Version = next
	return nil
}

// prevSandbox returns the stored record r replaces, locked for the rest of
// tx, when src makes sandbox events (nil otherwise, for an insert, or when
// it is not at r's version: casSandbox then refuses the write).
func prevSandbox(ctx context.Context, tx pgx.Tx, src *EventSource, r *sandbox.Record) (*sandbox.Record, error) {
	if src == nil || src.Sandbox == nil || r.Version == 0 {
		return nil, nil
	}
	var data []byte
	err := tx.QueryRow(ctx, "SELECT record FROM sandboxes WHERE id = $1 AND version = $2 FOR UPDATE", r.ID, r.Version).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dataError(err, "sandbox "+r.ID)
	}
	return decode[sandbox.Record]("sandbox", r.ID, data)
}

// sandboxEventPG appends, in tx, src's event of the change from prev to r
// at version next. It comes last in its transaction (appendEventPG).
func sandboxEventPG(ctx context.Context, tx pgx.Tx, src *EventSource, prev, r *sandbox.Record, next int64, appended *bool) error {
	if src == nil || src.Sandbox == nil {
		return nil
	}
	cur := *r
	cur.Version = next
	e, err := src.Sandbox(prev, &cur)
	return appendMade(ctx, tx, e, err, appended)
}

// AdmitSandbox writes r like PutSandbox unless its account already has
// limit live records other than r. The account's advisory lock orders
// admissions, and the count is read after it is taken.
func (p *Postgres) AdmitSandbox(ctx context.Context, r *sandbox.Record, limit int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r == nil || r.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "sandbox record needs an id")
	}
	if limit <= 0 {
		return p.writeSandbox(ctx, r, nil, nil)
	}
	return p.writeSandbox(ctx, r, func(tx pgx.Tx) error {
		if err := xactLock(ctx, tx, "account:"+r.Account); err != nil {
			return err
		}
		var n int
		err := tx.QueryRow(ctx, `SELECT count(*) FROM sandboxes
WHERE account = $1 AND state IN ('starting', 'running') AND id <> $2`, r.Account, r.ID).Scan(&n)
		if err != nil {
			return err
		}
		if n >= limit {
			return concurrencyError(r.Account, n)
		}
		return nil
	}, nil)
}

// casSandbox writes r at version r.Version+1 if the stored record is at
// r.Version (absent for 0) and returns the new version; r is not changed,
// so that a transaction that does not commit leaves it as it was.
func casSandbox(ctx context.Context, q querier, r *sandbox.Record) (int64, error) {
	next := *r
	next.Version = r.Version + 1
	data, err := json.Marshal(&next)
	if err != nil {
		return 0, fmt.Errorf("encoding sandbox %s: %w", r.ID, err)
	}
	args := []any{r.ID, r.Account, r.Node, string(r.State), next.Version, r.CreatedAt, data}
	var sql string
	if r.Version == 0 {
		sql = `INSERT INTO sandboxes (id, account, node, state, version, created_at, record)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`
	} else {
		sql = `UPDATE sandboxes SET account = $2, node = $3, state = $4, version = $5, created_at = $6, record = $7
WHERE id = $1 AND version = $8`
		args = append(args, r.Version)
	}
	tag, err := q.Exec(ctx, sql, args...)
	if err != nil {
		return 0, dataError(err, "sandbox "+r.ID)
	}
	if tag.RowsAffected() == 0 {
		if r.Version == 0 {
			return 0, fmt.Errorf("sandbox %s exists: %w", r.ID, ErrStale)
		}
		return 0, fmt.Errorf("sandbox %s is gone or not at version %d: %w", r.ID, r.Version, ErrStale)
	}
	return next.Version, nil
}

// GetSandbox returns the record with id.
func (p *Postgres) GetSandbox(ctx context.Context, id string) (*sandbox.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !storable(id) {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	var data []byte
	err := p.pool.QueryRow(ctx, "SELECT record FROM sandboxes WHERE id = $1", id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	if err != nil {
		return nil, dataError(err, "the sandbox id")
	}
	return decode[sandbox.Record]("sandbox", id, data)
}

// ListSandboxes returns the records that pass f, oldest first. Only the
// conditions f sets are in the statement, so that the planner sees each
// filter for what it is (the live indexes serve the state filters).
func (p *Postgres) ListSandboxes(ctx context.Context, f SandboxFilter) ([]*sandbox.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !storable(f.Account, f.Node) {
		return nil, nil
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.Account != "" {
		where = append(where, "account = "+arg(f.Account))
	}
	if f.Node != "" {
		where = append(where, "node = "+arg(f.Node))
	}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, s := range f.States {
			states[i] = string(s)
		}
		cond := "state = ANY(" + arg(states) + ")"
		if onlyLive(f) {
			// Lets the partial indexes of live records answer.
			cond += " AND state <> 'ended'"
		}
		where = append(where, cond)
	}
	sql := "SELECT id, record FROM sandboxes"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY created_at, id"
	rows, err := p.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, dataError(err, "the filter")
	}
	defer rows.Close()
	var out []*sandbox.Record
	for rows.Next() {
		var id string
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return nil, err
		}
		r, err := decode[sandbox.Record]("sandbox", id, data)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// The column has microseconds, records nanoseconds: the order every
	// store lists in is the records'.
	sortRecords(out)
	return out, nil
}

// DeleteSandbox removes the record with id.
func (p *Postgres) DeleteSandbox(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storable(id) {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	tag, err := p.pool.Exec(ctx, "DELETE FROM sandboxes WHERE id = $1", id)
	if err != nil {
		return dataError(err, "the sandbox id")
	}
	if tag.RowsAffected() == 0 {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	return nil
}

// RecordUsage writes r like PutSandbox and adds delta to its ledger row,
// in one transaction: when the record is stale neither changes.
func (p *Postgres) RecordUsage(ctx context.Context, r *sandbox.Record, delta UsageDelta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r == nil || r.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "sandbox record needs an id")
	}
	if delta.Empty() {
		return p.writeSandbox(ctx, r, nil, nil)
	}
	if delta.Day == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "usage delta needs a day")
	}
	return p.writeSandbox(ctx, r, nil, func(tx pgx.Tx) error { return addUsage(ctx, tx, delta) })
}

// addUsage adds delta to its ledger row in tx.
func addUsage(ctx context.Context, tx pgx.Tx, delta UsageDelta) error {
	_, err := tx.Exec(ctx, `INSERT INTO usage_ledger AS u (day, account, key_id, alive_ms, memory_mib_ms, cpu_ns, cost_nanos)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (day, account, key_id) DO UPDATE SET
    alive_ms = u.alive_ms + EXCLUDED.alive_ms,
    memory_mib_ms = u.memory_mib_ms + EXCLUDED.memory_mib_ms,
    cpu_ns = u.cpu_ns + EXCLUDED.cpu_ns,
    cost_nanos = u.cost_nanos + EXCLUDED.cost_nanos`,
		delta.Day, delta.Account, delta.KeyID, delta.AliveMs, delta.MemoryMiBMs, delta.CPUNs, delta.CostNanos)
	return dataError(err, "the usage delta")
}

// Usage returns the ledger rows that pass f, by day, account and key.
func (p *Postgres) Usage(ctx context.Context, f UsageFilter) ([]UsageRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !storable(f.Account, f.KeyID, f.From, f.To) {
		return nil, nil
	}
	rows, err := p.pool.Query(ctx, `SELECT day, account, key_id, alive_ms, memory_mib_ms, cpu_ns, cost_nanos
FROM usage_ledger
WHERE ($1 = '' OR account = $1) AND ($2 = '' OR key_id = $2) AND ($3 = '' OR day >= $3) AND ($4 = '' OR day <= $4)
ORDER BY day, account, key_id`, f.Account, f.KeyID, f.From, f.To)
	if err != nil {
		return nil, dataError(err, "the filter")
	}
	defer rows.Close()
	var out []UsageRow
	for rows.Next() {
		var r UsageRow
		if err := rows.Scan(&r.Day, &r.Account, &r.KeyID, &r.AliveMs, &r.MemoryMiBMs, &r.CPUNs, &r.CostNanos); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
