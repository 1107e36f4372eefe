package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// The templates' buckets: the records by id, and two indexes that the
// records' writes keep in step (putTemplateTx), so that a create's lookup
// by name reads one or a few records, never all.
var (
	bucketTemplates = []byte("templates")
	// bucketTemplateNames maps account \x00 name \x00 tag to the id of the
	// account's live template of that name:tag: the uniqueness rule.
	bucketTemplateNames = []byte("template_names")
	// bucketTemplatesPublic holds name \x00 tag \x00 id (no value) for each
	// live public template.
	bucketTemplatesPublic = []byte("public_templates")
)

func templateNameKey(account string, ref template.Ref) []byte {
	return []byte(account + "\x00" + ref.Name + "\x00" + ref.Tag)
}

func publicTemplatePrefix(ref template.Ref) []byte {
	return []byte(ref.Name + "\x00" + ref.Tag + "\x00")
}

// getTemplateTx reads the template with id in tx (nil when absent).
func getTemplateTx(tx *bolt.Tx, id []byte) (*template.Template, error) {
	v := tx.Bucket(bucketTemplates).Get(id)
	if v == nil {
		return nil, nil
	}
	t := new(template.Template)
	if err := json.Unmarshal(v, t); err != nil {
		return nil, fmt.Errorf("decoding template %s: %w", id, err)
	}
	return t, nil
}

// putTemplateTx writes t over old (nil for an insert) and moves the
// indexes from what old was to what t is, in tx.
func putTemplateTx(tx *bolt.Tx, old, t *template.Template) error {
	names, public := tx.Bucket(bucketTemplateNames), tx.Bucket(bucketTemplatesPublic)
	if old != nil {
		if old.DeletedAt == nil {
			if err := names.Delete(templateNameKey(old.Account, old.Ref())); err != nil {
				return err
			}
		}
		if err := public.Delete(append(publicTemplatePrefix(old.Ref()), old.ID...)); err != nil {
			return err
		}
	}
	if t == nil {
		return tx.Bucket(bucketTemplates).Delete([]byte(old.ID))
	}
	v, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encoding template %s: %w", t.ID, err)
	}
	if err := tx.Bucket(bucketTemplates).Put([]byte(t.ID), v); err != nil {
		return err
	}
	if t.DeletedAt != nil {
		return nil
	}
	if err := names.Put(templateNameKey(t.Account, t.Ref()), []byte(t.ID)); err != nil {
		return err
	}
	if t.Public {
		return public.Put(append(publicTemplatePrefix(t.Ref()), t.ID...), nil)
	}
	return nil
}

// liveTemplateTx returns account's live template of ref (nil for none).
func liveTemplateTx(tx *bolt.Tx, account string, ref template.Ref) (*template.Template, error) {
	id := tx.Bucket(bucketTemplateNames).Get(templateNameKey(account, ref))
	if id == nil {
		return nil, nil
	}
	t, err := getTemplateTx(tx, id)
	if err == nil && t == nil {
		err = fmt.Errorf("template index names missing template %s", id)
	}
	return t, err
}

// templateUsageTx counts account's live templates and their bytes, but
// not the one with id except.
func templateUsageTx(tx *bolt.Tx, account, except string) (int, int64, error) {
	prefix := []byte(account + "\x00")
	var n int
	var size int64
	c := tx.Bucket(bucketTemplateNames).Cursor()
	// Keys sort bytewise and an account holds no NUL: its names are one run.
	for k, id := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, id = c.Next() {
		if string(id) == except {
			continue
		}
		t, err := getTemplateTx(tx, id)
		if err != nil {
			return 0, 0, err
		}
		if t == nil {
			return 0, 0, fmt.Errorf("template index names missing template %s", id)
		}
		n++
		size += t.SizeBytes
	}
	return n, size, nil
}

// insertTemplateTx is the insert of PutTemplate and ReplaceTemplate: with
// replace, the account's live template of t's name:tag is removed first
// and returned.
func insertTemplateTx(tx *bolt.Tx, t *template.Template, q TemplateQuota, replace bool) (*template.Template, error) {
	if tx.Bucket(bucketTemplates).Get([]byte(t.ID)) != nil {
		return nil, sandbox.Errorf(sandbox.KindConflict, "template %s exists", t.ID)
	}
	old, err := liveTemplateTx(tx, t.Account, t.Ref())
	if err != nil {
		return nil, err
	}
	if old != nil && !replace {
		return nil, templateExists(t)
	}
	except := ""
	if old != nil {
		except = old.ID
	}
	n, size, err := templateUsageTx(tx, t.Account, except)
	if err != nil {
		return nil, err
	}
	if err := checkTemplateQuota(t, q, n, size); err != nil {
		return nil, err
	}
	if old != nil {
		gone := *old
		now := time.Now().UTC()
		gone.DeletedAt = &now
		if err := putTemplateTx(tx, old, &gone); err != nil {
			return nil, err
		}
		old = &gone
	}
	return old, putTemplateTx(tx, nil, t)
}

// PutTemplate inserts t unless its name:tag is taken or q refuses it.
func (b *Bolt) PutTemplate(ctx context.Context, t *template.Template, q TemplateQuota) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkTemplate(t); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		if _, err := insertTemplateTx(tx, t, q, false); err != nil {
			return err
		}
		return b.templateEventTx(tx, t)
	})
}

// ReplaceTemplate removes the account's live template of t's name:tag and
// inserts t, in one transaction.
func (b *Bolt) ReplaceTemplate(ctx context.Context, t *template.Template, q TemplateQuota) (*template.Template, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkTemplate(t); err != nil {
		return nil, err
	}
	var old *template.Template
	err := b.db.Update(func(tx *bolt.Tx) error {
		var err error
		if old, err = insertTemplateTx(tx, t, q, true); err != nil {
			return err
		}
		return b.templateEventTx(tx, t)
	})
	if err != nil {
		return nil, err
	}
	return old, nil
}

// GetTemplate returns the template with id, removed or not.
func (b *Bolt) GetTemplate(ctx context.Context, id string) (*template.Template, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var t *template.Template
	err := b.db.View(func(tx *bolt.Tx) error {
		var err error
		t, err = getTemplateTx(tx, []byte(id))
		return err
	})
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "template %s not found", id)
	}
	return t, nil
}

// TemplateByRef returns account's live template of ref, else the oldest
// public one.
func (b *Bolt) TemplateByRef(ctx context.Context, account string, ref template.Ref) (*template.Template, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var found *template.Template
	err := b.db.View(func(tx *bolt.Tx) error {
		if !storable(account, ref.Name, ref.Tag) {
			return nil
		}
		var err error
		if account != "" {
			if found, err = liveTemplateTx(tx, account, ref); found != nil || err != nil {
				return err
			}
		}
		var public []*template.Template
		prefix := publicTemplatePrefix(ref)
		c := tx.Bucket(bucketTemplatesPublic).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			t, err := getTemplateTx(tx, k[len(prefix):])
			if err != nil {
				return err
			}
			if t == nil {
				return fmt.Errorf("public template index names missing template %s", k[len(prefix):])
			}
			public = append(public, t)
		}
		found = oldestTemplate(public)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "template %s not found", ref)
	}
	return found, nil
}

// ListTemplates returns the templates that pass f, by name and tag.
func (b *Bolt) ListTemplates(ctx context.Context, f TemplateFilter) ([]*template.Template, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []*template.Template
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTemplates).ForEach(func(id, v []byte) error {
			t := new(template.Template)
			if err := json.Unmarshal(v, t); err != nil {
				return fmt.Errorf("decoding template %s: %w", id, err)
			}
			if f.Match(t) {
				out = append(out, t)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sortTemplates(out)
	return out, nil
}

// updateTemplate runs fn on the stored template with id and writes what
// fn leaves, in one transaction.
func (b *Bolt) updateTemplate(ctx context.Context, id string, fn func(t *template.Template) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		old, err := getTemplateTx(tx, []byte(id))
		if err != nil {
			return err
		}
		if old == nil {
			return sandbox.Errorf(sandbox.KindNotFound, "template %s not found", id)
		}
		t := *old
		if err := fn(&t); err != nil {
			return err
		}
		return putTemplateTx(tx, old, &t)
	})
}

// DeleteTemplate marks the template with id removed at at.
func (b *Bolt) DeleteTemplate(ctx context.Context, id string, at time.Time) error {
	return b.updateTemplate(ctx, id, markDeleted(at))
}

// SetTemplatePublic publishes the live template with id, or takes that
// back.
func (b *Bolt) SetTemplatePublic(ctx context.Context, id string, public bool) error {
	return b.updateTemplate(ctx, id, setPublic(id, public))
}

// PurgeTemplate removes the record of the removed template with id.
func (b *Bolt) PurgeTemplate(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		old, err := getTemplateTx(tx, []byte(id))
		if err != nil {
			return err
		}
		if old == nil {
			return sandbox.Errorf(sandbox.KindNotFound, "template %s not found", id)
		}
		if old.DeletedAt == nil {
			return sandbox.Errorf(sandbox.KindConflict, "template %s is live: remove it before purging it", id)
		}
		return putTemplateTx(tx, old, nil)
	})
}

// TemplateUsage counts account's live templates and their bytes.
func (b *Bolt) TemplateUsage(ctx context.Context, account string) (int, int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	if !storable(account) || account == "" {
		return 0, 0, nil
	}
	var n int
	var size int64
	err := b.db.View(func(tx *bolt.Tx) error {
		var err error
		n, size, err = templateUsageTx(tx, account, "")
		return err
	})
	return n, size, err
}
