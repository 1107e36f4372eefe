package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// AppendEvent adds e to the log. The Seq is taken under a transaction
// advisory lock, so appends commit in Seq order.
func (p *Postgres) AppendEvent(ctx context.Context, e *Event) error {
	return p.inTx(ctx, func(tx pgx.Tx) error { return appendEventPG(ctx, tx, e) })
}

// appendEventPG adds e to the log in tx. The events lock it takes is held
// until tx ends, so it comes last in every transaction that appends.
func appendEventPG(ctx context.Context, tx pgx.Tx, e *Event) error {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	if !storable(e.Account, e.Type, e.Subject) {
		return sandbox.Errorf(sandbox.KindInvalid, "event %s holds characters the store cannot keep", e.Type)
	}
	if err := xactLock(ctx, tx, "events"); err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, "SELECT nextval('events_seq')").Scan(&e.Seq); err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encoding event: %w", err)
	}
	_, err = tx.Exec(ctx, "INSERT INTO events (seq, account, at, event) VALUES ($1, $2, $3, $4)", e.Seq, e.Account, e.At, data)
	return dataError(err, "event")
}

// SetEventSource makes the sandbox writes and template inserts append
// src's events in their transactions.
func (p *Postgres) SetEventSource(src EventSource) { p.events.Store(&src) }

// sourced runs fn in a transaction with the store's event source (nil:
// none) and, when fn appended an event, has the source hear of it once
// the transaction committed. fn reports through its appended flag.
func (p *Postgres) sourced(ctx context.Context, fn func(tx pgx.Tx, src *EventSource, appended *bool) error) error {
	src := p.events.Load()
	appended := false
	err := p.inTx(ctx, func(tx pgx.Tx) error {
		appended = false
		return fn(tx, src, &appended)
	})
	if err == nil && appended && src.Appended != nil {
		src.Appended()
	}
	return err
}

// appendMade appends e (nil: none), made by an event source (err: failed
// to), in tx, and marks it appended.
func appendMade(ctx context.Context, tx pgx.Tx, e *Event, err error, appended *bool) error {
	if err != nil || e == nil {
		return err
	}
	if err := appendEventPG(ctx, tx, e); err != nil {
		return err
	}
	*appended = true
	return nil
}

// ListEvents returns account's events after after.
func (p *Postgres) ListEvents(ctx context.Context, account string, after int64, limit int) ([]Event, error) {
	sql := "SELECT event FROM events WHERE seq > $1 AND ($2 = '' OR account = $2) ORDER BY seq LIMIT $3"
	if !storable(account) {
		return nil, nil
	}
	return queryJSON[Event](ctx, p.pool, sql, after, account, limit)
}

// LastEventSeq is the largest Seq appended.
func (p *Postgres) LastEventSeq(ctx context.Context) (int64, error) {
	var n int64
	err := p.pool.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM events").Scan(&n)
	return n, err
}

// PruneEvents removes old events and audit entries.
func (p *Postgres) PruneEvents(ctx context.Context, before, auditBefore time.Time) (int, int, error) {
	ne, err := p.pool.Exec(ctx, "DELETE FROM events WHERE at < $1", before)
	if err != nil {
		return 0, 0, err
	}
	na, err := p.pool.Exec(ctx, "DELETE FROM audit WHERE at < $1", auditBefore)
	if err != nil {
		return int(ne.RowsAffected()), 0, err
	}
	return int(ne.RowsAffected()), int(na.RowsAffected()), nil
}

// PutWebhook inserts w, under the account's lock so that the bound holds
// across processes.
func (p *Postgres) PutWebhook(ctx context.Context, w *Webhook, max int) error {
	if err := checkWebhook(w); err != nil {
		return err
	}
	return p.inTx(ctx, func(tx pgx.Tx) error {
		if err := xactLock(ctx, tx, "webhooks:"+w.Account); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM webhooks WHERE account = $1", w.Account).Scan(&n); err != nil {
			return err
		}
		if max > 0 && n >= max {
			return tooManyWebhooks(w.Account, max)
		}
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM events").Scan(&w.Cursor); err != nil {
			return err
		}
		data, err := json.Marshal(w)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "INSERT INTO webhooks (id, account, created_at, cursor, webhook) VALUES ($1, $2, $3, $4, $5)",
			w.ID, w.Account, w.CreatedAt, w.Cursor, data)
		if pgCode(err) == pgUniqueViolation {
			return ErrStale
		}
		return dataError(err, "webhook "+w.ID)
	})
}

// webhookSelect reads a webhook with the cursor of its column.
const webhookSelect = "SELECT webhook || jsonb_build_object('cursor', cursor) FROM webhooks"

// ListWebhooks returns account's webhooks, oldest first.
func (p *Postgres) ListWebhooks(ctx context.Context, account string) ([]Webhook, error) {
	if !storable(account) {
		return nil, nil
	}
	ws, err := queryJSON[Webhook](ctx, p.pool, webhookSelect+" WHERE $1 = '' OR account = $1 ORDER BY created_at, id", account)
	sortWebhooks(ws)
	return ws, err
}

// GetWebhook returns the webhook with id.
func (p *Postgres) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	if !storable(id) {
		return nil, webhookNotFound(id)
	}
	ws, err := queryJSON[Webhook](ctx, p.pool, webhookSelect+" WHERE id = $1", id)
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, webhookNotFound(id)
	}
	return &ws[0], nil
}

// DeleteWebhook removes account's webhook id and its deliveries.
func (p *Postgres) DeleteWebhook(ctx context.Context, account, id string) error {
	if !storable(account, id) {
		return webhookNotFound(id)
	}
	return p.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM webhooks WHERE id = $1 AND ($2 = '' OR account = $2)", id, account)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return webhookNotFound(id)
		}
		_, err = tx.Exec(ctx, "DELETE FROM webhook_deliveries WHERE webhook = $1", id)
		return err
	})
}

// AdvanceWebhook moves the cursor and logs d.
func (p *Postgres) AdvanceWebhook(ctx context.Context, id string, seq int64, d *Delivery) error {
	if !storable(id) {
		return webhookNotFound(id)
	}
	return p.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE webhooks SET cursor = greatest(cursor, $2) WHERE id = $1", id, seq)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return webhookNotFound(id)
		}
		if d == nil {
			return nil
		}
		d.Webhook = id
		data, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO webhook_deliveries (webhook, delivery) VALUES ($1, $2)", id, data); err != nil {
			return dataError(err, "delivery")
		}
		_, err = tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE webhook = $1 AND id <= (
SELECT id FROM webhook_deliveries WHERE webhook = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`, id, MaxDeliveries)
		return err
	})
}

// ListDeliveries returns webhook id's deliveries, newest first.
func (p *Postgres) ListDeliveries(ctx context.Context, id string, limit int) ([]Delivery, error) {
	if !storable(id) {
		return nil, nil
	}
	return queryJSON[Delivery](ctx, p.pool, "SELECT delivery FROM webhook_deliveries WHERE webhook = $1 ORDER BY id DESC LIMIT $2", id, limit)
}

// AppendAudit adds a to the audit log.
func (p *Postgres) AppendAudit(ctx context.Context, a *AuditEntry) error {
	if a.At.IsZero() {
		a.At = time.Now().UTC()
	}
	return p.inTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT nextval(pg_get_serial_sequence('audit', 'seq'))").Scan(&a.Seq); err != nil {
			return err
		}
		data, err := json.Marshal(a)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "INSERT INTO audit (seq, at, entry) VALUES ($1, $2, $3)", a.Seq, a.At, data)
		return dataError(err, "audit entry")
	})
}

// ListAudit returns the entries made at or after since.
func (p *Postgres) ListAudit(ctx context.Context, since time.Time, limit int) ([]AuditEntry, error) {
	return queryJSON[AuditEntry](ctx, p.pool, "SELECT entry FROM audit WHERE at >= $1 ORDER BY seq LIMIT $2", since, limit)
}

// queryJSON runs sql, which selects one JSONB column, and decodes each row.
func queryJSON[T any](ctx context.Context, q querier, sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("decoding a row: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
