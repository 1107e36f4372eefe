package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// templateColumns are the columns of a template row; templateArgs gives
// their values for t, in order.
const templateColumns = "id, account, name, tag, public, size_bytes, created_at, deleted_at, template"

func templateArgs(t *template.Template) ([]any, error) {
	data, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encoding template %s: %w", t.ID, err)
	}
	return []any{t.ID, t.Account, t.Name, t.Tag, t.Public, t.SizeBytes, t.CreatedAt, t.DeletedAt, data}, nil
}

// writeTemplate inserts t, or with update replaces the row with t's id.
func writeTemplate(ctx context.Context, q querier, t *template.Template, update bool) error {
	args, err := templateArgs(t)
	if err != nil {
		return err
	}
	sql := "INSERT INTO templates (" + templateColumns + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
	if update {
		sql = `UPDATE templates SET account = $2, name = $3, tag = $4, public = $5, size_bytes = $6,
created_at = $7, deleted_at = $8, template = $9 WHERE id = $1`
	}
	_, err = q.Exec(ctx, sql, args...)
	if pgCode(err) == pgUniqueViolation {
		// The account's advisory lock orders inserts, so this is an id
		// taken, or a writer that did not take the lock.
		return sandbox.Wrap(sandbox.KindConflict, err, fmt.Sprintf("template %s or %s exists", t.ID, t.Ref()))
	}
	return dataError(err, "template "+t.ID)
}

// queryTemplates runs sql, which selects id and template, and decodes the
// rows.
func queryTemplates(ctx context.Context, q querier, sql string, args ...any) ([]*template.Template, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, dataError(err, "the template query")
	}
	defer rows.Close()
	var out []*template.Template
	for rows.Next() {
		var id string
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return nil, err
		}
		t, err := decode[template.Template]("template", id, data)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// oneTemplate is queryTemplates of at most one row (nil for none).
func oneTemplate(ctx context.Context, q querier, sql string, args ...any) (*template.Template, error) {
	ts, err := queryTemplates(ctx, q, sql, args...)
	if err != nil || len(ts) == 0 {
		return nil, err
	}
	return ts[0], nil
}

// insertTemplate is the transaction of PutTemplate and ReplaceTemplate.
// The account's advisory lock orders every insert of the account's
// templates, so the name check and the quota's count are read after the
// last insert committed: of racing inserts of one name:tag, one wins.
func (p *Postgres) insertTemplate(ctx context.Context, t *template.Template, q TemplateQuota, replace bool) (*template.Template, error) {
	var old *template.Template
	err := p.sourced(ctx, func(tx pgx.Tx, src *EventSource, appended *bool) error {
		old = nil
		if err := xactLock(ctx, tx, "templates:"+t.Account); err != nil {
			return err
		}
		var taken bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM templates WHERE id = $1)", t.ID).Scan(&taken); err != nil {
			return err
		}
		if taken {
			return sandbox.Errorf(sandbox.KindConflict, "template %s exists", t.ID)
		}
		cur, err := oneTemplate(ctx, tx, `SELECT id, template FROM templates
WHERE account = $1 AND name = $2 AND tag = $3 AND deleted_at IS NULL FOR UPDATE`, t.Account, t.Name, t.Tag)
		if err != nil {
			return err
		}
		if cur != nil && !replace {
			return templateExists(t)
		}
		except := ""
		if cur != nil {
			except = cur.ID
		}
		var n int
		var size int64
		err = tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(size_bytes), 0) FROM templates
WHERE account = $1 AND deleted_at IS NULL AND id <> $2`, t.Account, except).Scan(&n, &size)
		if err != nil {
			return err
		}
		if err := checkTemplateQuota(t, q, n, size); err != nil {
			return err
		}
		if cur != nil {
			now := time.Now().UTC()
			cur.DeletedAt = &now
			if err := writeTemplate(ctx, tx, cur, true); err != nil {
				return err
			}
			old = cur
		}
		if err := writeTemplate(ctx, tx, t, false); err != nil {
			return err
		}
		if src == nil || src.Template == nil {
			return nil
		}
		e, err := src.Template(t)
		return appendMade(ctx, tx, e, err, appended)
	})
	if err != nil {
		return nil, err
	}
	return old, nil
}

// PutTemplate inserts t unless its name:tag is taken or q refuses it.
func (p *Postgres) PutTemplate(ctx context.Context, t *template.Template, q TemplateQuota) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkTemplate(t); err != nil {
		return err
	}
	_, err := p.insertTemplate(ctx, t, q, false)
	return err
}

// ReplaceTemplate removes the account's live template of t's name:tag and
// inserts t, in one transaction.
func (p *Postgres) ReplaceTemplate(ctx context.Context, t *template.Template, q TemplateQuota) (*template.Template, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkTemplate(t); err != nil {
		return nil, err
	}
	return p.insertTemplate(ctx, t, q, true)
}

// GetTemplate returns the template with id, removed or not.
func (p *Postgres) GetTemplate(ctx context.Context, id string) (*template.Template, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var t *template.Template
	if storable(id) {
		var err error
		if t, err = oneTemplate(ctx, p.pool, "SELECT id, template FROM templates WHERE id = $1", id); err != nil {
			return nil, err
		}
	}
	if t == nil {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "template %s not found", id)
	}
	return t, nil
}

// TemplateByRef returns account's live template of ref, else the oldest
// public one.
func (p *Postgres) TemplateByRef(ctx context.Context, account string, ref template.Ref) (*template.Template, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var t *template.Template
	if storable(account, ref.Name, ref.Tag) {
		// The account's own sorts first; created_at has microseconds, so
		// the oldest public one is picked again in Go by nanoseconds.
		ts, err := queryTemplates(ctx, p.pool, `SELECT id, template FROM templates
WHERE name = $2 AND tag = $3 AND deleted_at IS NULL AND (account = $1 OR public)`, account, ref.Name, ref.Tag)
		if err != nil {
			return nil, err
		}
		var public []*template.Template
		for _, c := range ts {
			if c.Account == account && account != "" {
				return c, nil
			}
			public = append(public, c)
		}
		t = oldestTemplate(public)
	}
	if t == nil {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "template %s not found", ref)
	}
	return t, nil
}

// ListTemplates returns the templates that pass f, by name and tag.
func (p *Postgres) ListTemplates(ctx context.Context, f TemplateFilter) ([]*template.Template, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !storable(f.Account) {
		return nil, nil
	}
	ts, err := queryTemplates(ctx, p.pool, `SELECT id, template FROM templates
WHERE ($2 OR deleted_at IS NULL)
  AND ($1 = '' OR account = $1 OR ($3 AND public AND deleted_at IS NULL))`, f.Account, f.Deleted, f.Public)
	if err != nil {
		return nil, err
	}
	sortTemplates(ts)
	return ts, nil
}

// updateTemplate runs fn on the stored template with id and writes what
// fn leaves, in one transaction (the row locked meanwhile).
func (p *Postgres) updateTemplate(ctx context.Context, id string, fn func(t *template.Template) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storable(id) {
		return sandbox.Errorf(sandbox.KindNotFound, "template %s not found", id)
	}
	return p.inTx(ctx, func(tx pgx.Tx) error {
		t, err := oneTemplate(ctx, tx, "SELECT id, template FROM templates WHERE id = $1 FOR UPDATE", id)
		if err != nil {
			return err
		}
		if t == nil {
			return sandbox.Errorf(sandbox.KindNotFound, "template %s not found", id)
		}
		if err := fn(t); err != nil {
			return err
		}
		return writeTemplate(ctx, tx, t, true)
	})
}

// DeleteTemplate marks the template with id removed at at.
func (p *Postgres) DeleteTemplate(ctx context.Context, id string, at time.Time) error {
	return p.updateTemplate(ctx, id, markDeleted(at))
}

// SetTemplatePublic publishes the live template with id, or takes that
// back.
func (p *Postgres) SetTemplatePublic(ctx context.Context, id string, public bool) error {
	return p.updateTemplate(ctx, id, setPublic(id, public))
}

// PurgeTemplate removes the record of the removed template with id.
func (p *Postgres) PurgeTemplate(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storable(id) {
		return sandbox.Errorf(sandbox.KindNotFound, "template %s not found", id)
	}
	tag, err := p.pool.Exec(ctx, "DELETE FROM templates WHERE id = $1 AND deleted_at IS NOT NULL", id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	// Nothing removed: absent, or live.
	var live bool
	err = p.pool.QueryRow(ctx, "SELECT deleted_at IS NULL FROM templates WHERE id = $1", id).Scan(&live)
	if errors.Is(err, pgx.ErrNoRows) {
		return sandbox.Errorf(sandbox.KindNotFound, "template %s not found", id)
	}
	if err != nil {
		return err
	}
	return sandbox.Errorf(sandbox.KindConflict, "template %s is live: remove it before purging it", id)
}

// TemplateUsage counts account's live templates and their bytes.
func (p *Postgres) TemplateUsage(ctx context.Context, account string) (int, int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	if !storable(account) || account == "" {
		return 0, 0, nil
	}
	var n int
	var size int64
	err := p.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(size_bytes), 0) FROM templates
WHERE account = $1 AND deleted_at IS NULL`, account).Scan(&n, &size)
	return n, size, err
}
