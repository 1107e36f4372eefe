package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// The event log's buckets (events.go).
var (
	// bucketEvents maps a big-endian Seq to the event: the keys sort in
	// the order of the log. bbolt's writes are serialised, so a Seq is
	// visible only after every smaller one.
	bucketEvents   = []byte("events")
	bucketWebhooks = []byte("webhooks")
	// bucketDeliveries maps webhook id \x00 big-endian sequence to a
	// delivery.
	bucketDeliveries = []byte("webhook_deliveries")
	// bucketAudit maps a big-endian Seq to an audit entry.
	bucketAudit = []byte("audit")
)

func seqKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// AppendEvent adds e to the log.
func (b *Bolt) AppendEvent(ctx context.Context, e *Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error { return appendEventTx(tx, e) })
}

// appendEventTx adds e to the log in tx.
func appendEventTx(tx *bolt.Tx, e *Event) error {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	bk := tx.Bucket(bucketEvents)
	n, err := bk.NextSequence()
	if err != nil {
		return err
	}
	e.Seq = int64(n)
	v, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encoding event: %w", err)
	}
	return bk.Put(seqKey(n), v)
}

// SetEventSource makes the sandbox writes and template inserts append
// src's events in their transactions.
func (b *Bolt) SetEventSource(src EventSource) { b.events.Store(&src) }

// sandboxEventTx appends, in tx, the event of the change from old (the
// stored JSON, nil for an insert) to r.
func (b *Bolt) sandboxEventTx(tx *bolt.Tx, old []byte, r *sandbox.Record) error {
	src := b.events.Load()
	if src == nil || src.Sandbox == nil {
		return nil
	}
	var prev *sandbox.Record
	if old != nil {
		prev = new(sandbox.Record)
		if err := json.Unmarshal(old, prev); err != nil {
			return fmt.Errorf("decoding sandbox %s: %w", r.ID, err)
		}
	}
	e, err := src.Sandbox(prev, r)
	return appendSourcedTx(tx, src, e, err)
}

// templateEventTx appends, in tx, the event of t's insert.
func (b *Bolt) templateEventTx(tx *bolt.Tx, t *template.Template) error {
	src := b.events.Load()
	if src == nil || src.Template == nil {
		return nil
	}
	e, err := src.Template(t)
	return appendSourcedTx(tx, src, e, err)
}

// appendSourcedTx appends e (nil: none), which src made (err: failed to),
// and has src hear of it once tx commits.
func appendSourcedTx(tx *bolt.Tx, src *EventSource, e *Event, err error) error {
	if err != nil || e == nil {
		return err
	}
	if err := appendEventTx(tx, e); err != nil {
		return err
	}
	if src.Appended != nil {
		tx.OnCommit(src.Appended)
	}
	return nil
}

// ListEvents returns account's events after after.
func (b *Bolt) ListEvents(ctx context.Context, account string, after int64, limit int) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Event
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.Seek(seqKey(uint64(after) + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decoding event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if account == "" || e.Account == account {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// LastEventSeq is the largest Seq handed out.
func (b *Bolt) LastEventSeq(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var n int64
	err := b.db.View(func(tx *bolt.Tx) error {
		n = int64(tx.Bucket(bucketEvents).Sequence())
		return nil
	})
	return n, err
}

// PruneEvents removes old events and audit entries.
func (b *Bolt) PruneEvents(ctx context.Context, before, auditBefore time.Time) (int, int, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	var ne, na int
	err := b.db.Update(func(tx *bolt.Tx) error {
		var err error
		if ne, err = pruneSeqBucket(tx.Bucket(bucketEvents), before, func(v []byte) (time.Time, error) {
			var e Event
			err := json.Unmarshal(v, &e)
			return e.At, err
		}); err != nil {
			return err
		}
		na, err = pruneSeqBucket(tx.Bucket(bucketAudit), auditBefore, func(v []byte) (time.Time, error) {
			var a AuditEntry
			err := json.Unmarshal(v, &a)
			return a.At, err
		})
		return err
	})
	return ne, na, err
}

// pruneSeqBucket removes the oldest entries of bk, those made before
// before; entries are appended in time order, so it stops at the first
// later one.
func pruneSeqBucket(bk *bolt.Bucket, before time.Time, at func([]byte) (time.Time, error)) (int, error) {
	var keys [][]byte
	c := bk.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		t, err := at(v)
		if err != nil {
			return 0, err
		}
		if !t.Before(before) {
			break
		}
		keys = append(keys, slices.Clone(k))
	}
	for _, k := range keys {
		if err := bk.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// PutWebhook inserts w.
func (b *Bolt) PutWebhook(ctx context.Context, w *Webhook, max int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkWebhook(w); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketWebhooks)
		if bk.Get([]byte(w.ID)) != nil {
			return ErrStale
		}
		n := 0
		if err := bk.ForEach(func(_, v []byte) error {
			var o Webhook
			if err := json.Unmarshal(v, &o); err != nil {
				return err
			}
			if o.Account == w.Account {
				n++
			}
			return nil
		}); err != nil {
			return err
		}
		if max > 0 && n >= max {
			return tooManyWebhooks(w.Account, max)
		}
		w.Cursor = int64(tx.Bucket(bucketEvents).Sequence())
		v, err := json.Marshal(w)
		if err != nil {
			return err
		}
		return bk.Put([]byte(w.ID), v)
	})
}

// ListWebhooks returns account's webhooks, oldest first.
func (b *Bolt) ListWebhooks(ctx context.Context, account string) ([]Webhook, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Webhook
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWebhooks).ForEach(func(_, v []byte) error {
			var w Webhook
			if err := json.Unmarshal(v, &w); err != nil {
				return err
			}
			if account == "" || w.Account == account {
				out = append(out, w)
			}
			return nil
		})
	})
	sortWebhooks(out)
	return out, err
}

// GetWebhook returns the webhook with id.
func (b *Bolt) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var w Webhook
	found, err := b.get(bucketWebhooks, id, &w)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, webhookNotFound(id)
	}
	return &w, nil
}

// DeleteWebhook removes account's webhook id and its deliveries.
func (b *Bolt) DeleteWebhook(ctx context.Context, account, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketWebhooks)
		v := bk.Get([]byte(id))
		var w Webhook
		if v == nil || json.Unmarshal(v, &w) != nil || account != "" && w.Account != account {
			return webhookNotFound(id)
		}
		if err := bk.Delete([]byte(id)); err != nil {
			return err
		}
		return deleteDeliveries(tx.Bucket(bucketDeliveries), id, -1)
	})
}

// deleteDeliveries removes webhook id's deliveries but the newest keep
// (all of them when keep is not above 0).
func deleteDeliveries(bk *bolt.Bucket, id string, keep int) error {
	prefix := []byte(id + "\x00")
	var keys [][]byte
	c := bk.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, slices.Clone(k))
	}
	if keep > 0 {
		keys = keys[:max(0, len(keys)-keep)]
	}
	for _, k := range keys {
		if err := bk.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// AdvanceWebhook moves the cursor and logs d.
func (b *Bolt) AdvanceWebhook(ctx context.Context, id string, seq int64, d *Delivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketWebhooks)
		v := bk.Get([]byte(id))
		if v == nil {
			return webhookNotFound(id)
		}
		var w Webhook
		if err := json.Unmarshal(v, &w); err != nil {
			return err
		}
		w.Cursor = max(w.Cursor, seq)
		v, err := json.Marshal(&w)
		if err != nil {
			return err
		}
		if err := bk.Put([]byte(id), v); err != nil {
			return err
		}
		if d == nil {
			return nil
		}
		d.Webhook = id
		dv, err := json.Marshal(d)
		if err != nil {
			return err
		}
		db := tx.Bucket(bucketDeliveries)
		n, err := db.NextSequence()
		if err != nil {
			return err
		}
		if err := db.Put(append([]byte(id+"\x00"), seqKey(n)...), dv); err != nil {
			return err
		}
		return deleteDeliveries(db, id, MaxDeliveries)
	})
}

// ListDeliveries returns webhook id's deliveries, newest first.
func (b *Bolt) ListDeliveries(ctx context.Context, id string, limit int) ([]Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Delivery
	err := b.db.View(func(tx *bolt.Tx) error {
		prefix := []byte(id + "\x00")
		c := tx.Bucket(bucketDeliveries).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var d Delivery
			if err := json.Unmarshal(v, &d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	slices.Reverse(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// AppendAudit adds a to the audit log.
func (b *Bolt) AppendAudit(ctx context.Context, a *AuditEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.At.IsZero() {
		a.At = time.Now().UTC()
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketAudit)
		n, err := bk.NextSequence()
		if err != nil {
			return err
		}
		a.Seq = int64(n)
		v, err := json.Marshal(a)
		if err != nil {
			return err
		}
		return bk.Put(seqKey(n), v)
	})
}

// ListAudit returns the entries made at or after since.
func (b *Bolt) ListAudit(ctx context.Context, since time.Time, limit int) ([]AuditEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []AuditEntry
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			var a AuditEntry
			if err := json.Unmarshal(v, &a); err != nil {
				return err
			}
			if !a.At.Before(since) {
				out = append(out, a)
			}
		}
		return nil
	})
	return out, err
}

func sortWebhooks(ws []Webhook) {
	slices.SortStableFunc(ws, func(x, y Webhook) int {
		if c := x.CreatedAt.Compare(y.CreatedAt); c != 0 {
			return c
		}
		return bytes.Compare([]byte(x.ID), []byte(y.ID))
	})
}
