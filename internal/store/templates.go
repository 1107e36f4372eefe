package store

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// Templates keeps the templates' records (internal/template.Template): what
// a template is made of and who may start from it. The layers themselves
// are files (internal/layer); a record says which, and a removed record
// (DeletedAt set) stays until those files are freed (PurgeTemplate).
//
// An account holds at most one live (not removed) template of each
// name:tag. Every write that adds one checks that rule and the account's
// TemplateQuota in the same transaction as the insert, so both hold across
// every process of a store.
type Templates interface {
	// PutTemplate inserts t, a new live template. A live template of the
	// same account, name and tag, or any template with t's ID, is a
	// conflict-kind error; so a build of a name that exists must say it
	// replaces it (ReplaceTemplate). When the account's live templates
	// with t would pass q, the error is ErrTemplateQuota's kind
	// (forbidden) and nothing is written.
	PutTemplate(ctx context.Context, t *template.Template, q TemplateQuota) error
	// ReplaceTemplate is PutTemplate that first marks the account's live
	// template of t's name:tag removed (DeletedAt now), in one
	// transaction, and returns that one (nil when there was none: then it
	// is a plain insert). It is how a rebuild of name:tag takes the name:
	// the old template's bytes and count do not count against q, and its
	// layers stay until its users end and it is purged.
	ReplaceTemplate(ctx context.Context, t *template.Template, q TemplateQuota) (old *template.Template, err error)
	// GetTemplate returns the template with id, removed or not: sandboxes
	// and pools hold a template by id, so they find it after its name was
	// taken by a rebuild or freed by a delete.
	GetTemplate(ctx context.Context, id string) (*template.Template, error)
	// TemplateByRef returns account's live template of ref's name:tag, or,
	// when the account has none, a public live one of that name:tag of any
	// account (the oldest, when several accounts published one), or a
	// not_found-kind error. Removed templates are never found by name.
	TemplateByRef(ctx context.Context, account string, ref template.Ref) (*template.Template, error)
	// ListTemplates returns the templates that pass f, by name, tag,
	// account, then oldest first.
	ListTemplates(ctx context.Context, f TemplateFilter) ([]*template.Template, error)
	// DeleteTemplate marks the template with id removed at at: its name is
	// free at once, and it is purged once nothing uses it. A template
	// already removed keeps the time it was first removed at.
	DeleteTemplate(ctx context.Context, id string, at time.Time) error
	// PurgeTemplate removes the record of a removed template for good,
	// once its storage is freed. A live template is a conflict-kind error:
	// it must be removed (DeleteTemplate) first.
	PurgeTemplate(ctx context.Context, id string) error
	// SetTemplatePublic publishes a live template to every account (or
	// takes that back). A removed template is not found.
	SetTemplatePublic(ctx context.Context, id string, public bool) error
	// TemplateUsage returns how many live templates account holds and the
	// sum of their sizes: what its quota counts.
	TemplateUsage(ctx context.Context, account string) (count int, bytes int64, err error)
}

// TemplateFilter selects templates.
type TemplateFilter struct {
	// Account selects that account's templates ("" every account's).
	Account string
	// Public adds the public templates of every other account.
	Public bool
	// Deleted adds the removed templates (by default only live ones).
	Deleted bool
}

// Match reports whether t passes the filter.
func (f TemplateFilter) Match(t *template.Template) bool {
	if t.DeletedAt != nil && !f.Deleted {
		return false
	}
	return f.Account == "" || t.Account == f.Account || f.Public && t.Public && t.DeletedAt == nil
}

// TemplateQuota bounds an account's live templates. Zero fields bound
// nothing.
type TemplateQuota struct {
	// MaxCount is how many live templates the account may hold.
	MaxCount int
	// MaxBytes is the sum of their SizeBytes the account may hold.
	MaxBytes int64
}

// ErrTemplateQuota is the kind of the error of a write that would take an
// account past its TemplateQuota: errors.Is(err, ErrTemplateQuota). The
// API has no code of its own for quotas; an account's bound on what it may
// hold is forbidden (403), as a trial account's bound on its keys is.
var ErrTemplateQuota = &sandbox.Error{Kind: sandbox.KindForbidden}

// checkTemplateQuota refuses t when the account, which holds count live
// templates of bytes in all besides the one t replaces, would pass q with
// t.
func checkTemplateQuota(t *template.Template, q TemplateQuota, count int, bytes int64) error {
	if q.MaxCount > 0 && count+1 > q.MaxCount {
		return sandbox.Errorf(sandbox.KindForbidden, "account %s holds %d templates, its quota", t.Account, count)
	}
	if q.MaxBytes > 0 && bytes+t.SizeBytes > q.MaxBytes {
		return sandbox.Errorf(sandbox.KindForbidden, "template %s needs %d bytes and account %s holds %d of its quota of %d",
			t.Ref(), t.SizeBytes, t.Account, bytes, q.MaxBytes)
	}
	return nil
}

// templateExists is the error of an insert whose name:tag the account
// holds already.
func templateExists(t *template.Template) error {
	return sandbox.Errorf(sandbox.KindConflict, "template %s exists; a rebuild replaces it", t.Ref())
}

// checkTemplate refuses templates no store may hold: a new live template
// with an id, an account, a name and tag of the right shape, and layers
// that are digests.
func checkTemplate(t *template.Template) error {
	switch {
	case t == nil || t.ID == "":
		return sandbox.Errorf(sandbox.KindInvalid, "template needs an id")
	case !storable(t.ID):
		return sandbox.Errorf(sandbox.KindInvalid, "template id %q holds characters the store cannot keep", t.ID)
	case t.Account == "" || !storable(t.Account):
		return sandbox.Errorf(sandbox.KindInvalid, "template %s needs an account without NUL bytes", t.ID)
	case t.DeletedAt != nil:
		return sandbox.Errorf(sandbox.KindInvalid, "template %s is new: it cannot be removed already", t.ID)
	case t.SizeBytes < 0:
		return sandbox.Errorf(sandbox.KindInvalid, "template %s has a negative size", t.ID)
	case len(t.Layers) > template.MaxLayers:
		return sandbox.Errorf(sandbox.KindInvalid, "template %s has %d layers, at most %d", t.ID, len(t.Layers), template.MaxLayers)
	}
	if ref, err := template.ParseRef(t.Name + ":" + t.Tag); err != nil || ref != t.Ref() {
		return sandbox.Errorf(sandbox.KindInvalid, "template %s: bad name %q or tag %q", t.ID, t.Name, t.Tag)
	}
	for _, d := range t.Layers {
		if !template.ValidDigest(d) {
			return sandbox.Errorf(sandbox.KindInvalid, "template %s: layer %q is not a sha256 digest", t.ID, d)
		}
	}
	return nil
}

// sortTemplates puts templates in the order every store lists them in.
func sortTemplates(ts []*template.Template) {
	slices.SortStableFunc(ts, func(x, y *template.Template) int {
		return cmp.Or(
			strings.Compare(x.Name, y.Name),
			strings.Compare(x.Tag, y.Tag),
			strings.Compare(x.Account, y.Account),
			x.CreatedAt.Compare(y.CreatedAt),
			strings.Compare(x.ID, y.ID),
		)
	})
}

// oldestTemplate is the one of ts made first (by id when made at once),
// nil for none: the public template a name finds when several accounts
// published one.
func oldestTemplate(ts []*template.Template) *template.Template {
	var best *template.Template
	for _, t := range ts {
		if best == nil || cmp.Or(t.CreatedAt.Compare(best.CreatedAt), strings.Compare(t.ID, best.ID)) < 0 {
			best = t
		}
	}
	return best
}

// markDeleted is DeleteTemplate's change of a record: removed at at, or
// left at the time it was first removed.
func markDeleted(at time.Time) func(*template.Template) error {
	return func(t *template.Template) error {
		if t.DeletedAt == nil {
			at := at.UTC()
			t.DeletedAt = &at
		}
		return nil
	}
}

// setPublic is SetTemplatePublic's change of the record with id: a removed
// template is not found.
func setPublic(id string, public bool) func(*template.Template) error {
	return func(t *template.Template) error {
		if t.DeletedAt != nil {
			return sandbox.Errorf(sandbox.KindNotFound, "template %s not found: it was removed", id)
		}
		t.Public = public
		return nil
	}
}
