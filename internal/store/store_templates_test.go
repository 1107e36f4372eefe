package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// tpl is a live template of account named ref ("name:tag"), made at
// t0+age, of size bytes.
func tpl(id, account, ref string, age time.Duration, size int64) *template.Template {
	r, err := template.ParseRef(ref)
	if err != nil {
		panic(err)
	}
	return &template.Template{
		ID: id, Account: account, Name: r.Name, Tag: r.Tag,
		Source: template.SourceBuild, Base: template.DefaultBase,
		// Every store keeps the base image's key with the record (in its
		// JSON, which PostgreSQL's row holds whole: no column of its own).
		BaseKey:   "debian-bookworm-test-key",
		Layers:    []string{"sha256:" + strings.Repeat("ab", 32)},
		SizeBytes: size,
		Defaults:  template.Defaults{Env: map[string]string{"A": "b"}, Workdir: "/workspace", StartCmd: "serve"},
		CreatedAt: t0.Add(age),
	}
}

func mustPutTemplate(t *testing.T, st Store, tp *template.Template) {
	t.Helper()
	if err := st.PutTemplate(context.Background(), tp, TemplateQuota{}); err != nil {
		t.Fatalf("PutTemplate(%s %s): %v", tp.ID, tp.Ref(), err)
	}
}

func wantKind(t *testing.T, what string, err error, k sandbox.Kind) {
	t.Helper()
	if err == nil || sandbox.KindOf(err) != k {
		t.Fatalf("%s: got %v, want a %s error", what, err, k)
	}
}

// sameTemplate fails unless got is want as stored (JSON, which carries
// every field, times to the nanosecond).
func sameTemplate(t *testing.T, what string, got, want *template.Template) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s:\ngot  %s\nwant %s", what, g, w)
	}
}

func templateIDs(ts []*template.Template) string {
	var ids []string
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	return strings.Join(ids, " ")
}

func TestTemplateUniqueName(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		a := tpl("tpl_a", "acme", "app:v1", 0, 10)
		mustPutTemplate(t, st, a)
		got, err := st.GetTemplate(ctx, "tpl_a")
		if err != nil {
			t.Fatal(err)
		}
		sameTemplate(t, "stored template", got, a)

		wantKind(t, "a second acme app:v1", st.PutTemplate(ctx, tpl("tpl_b", "acme", "app:v1", 1, 10), TemplateQuota{}), sandbox.KindConflict)
		wantKind(t, "a second tpl_a", st.PutTemplate(ctx, tpl("tpl_a", "acme", "app:v2", 1, 10), TemplateQuota{}), sandbox.KindConflict)
		if _, err := st.GetTemplate(ctx, "tpl_b"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("refused template tpl_b: got %v, want not found", err)
		}
		// Another tag, another account: other templates.
		mustPutTemplate(t, st, tpl("tpl_c", "acme", "app:v2", 2, 10))
		mustPutTemplate(t, st, tpl("tpl_d", "other", "app:v1", 3, 10))

		// A removed template frees its name.
		if err := st.DeleteTemplate(ctx, "tpl_a", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		mustPutTemplate(t, st, tpl("tpl_e", "acme", "app:v1", 4, 10))
		got, err = st.TemplateByRef(ctx, "acme", template.Ref{Name: "app", Tag: "v1"})
		if err != nil || got.ID != "tpl_e" {
			t.Fatalf("acme app:v1 after its rebuild: got %v, %v, want tpl_e", got, err)
		}
	})
}

func TestTemplateInvalid(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		gone := t0
		for _, tc := range []struct {
			name   string
			change func(tp *template.Template)
		}{
			{"no id", func(tp *template.Template) { tp.ID = "" }},
			{"no account", func(tp *template.Template) { tp.Account = "" }},
			{"NUL in account", func(tp *template.Template) { tp.Account = "a\x00b" }},
			{"bad name", func(tp *template.Template) { tp.Name = "App" }},
			{"no tag", func(tp *template.Template) { tp.Tag = "" }},
			{"bad layer", func(tp *template.Template) { tp.Layers = []string{"sha256:xyz"} }},
			{"too many layers", func(tp *template.Template) { tp.Layers = make([]string, template.MaxLayers+1) }},
			{"removed", func(tp *template.Template) { tp.DeletedAt = &gone }},
			{"negative size", func(tp *template.Template) { tp.SizeBytes = -1 }},
		} {
			tp := tpl("tpl_x", "acme", "app", 0, 1)
			tc.change(tp)
			wantKind(t, tc.name, st.PutTemplate(ctx, tp, TemplateQuota{}), sandbox.KindInvalid)
			_, err := st.ReplaceTemplate(ctx, tp, TemplateQuota{})
			wantKind(t, tc.name+" (replace)", err, sandbox.KindInvalid)
		}
		if ts, err := st.ListTemplates(ctx, TemplateFilter{Deleted: true}); err != nil || len(ts) != 0 {
			t.Fatalf("after refused writes: got %v, %v, want no templates", templateIDs(ts), err)
		}
	})
}

func TestTemplateReplace(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		// Without a live one, a replace inserts.
		v1 := tpl("tpl_1", "acme", "app", 0, 10)
		old, err := st.ReplaceTemplate(ctx, v1, TemplateQuota{})
		if err != nil || old != nil {
			t.Fatalf("first ReplaceTemplate: got %v, %v, want nil, nil", old, err)
		}
		before := time.Now()
		v2 := tpl("tpl_2", "acme", "app", time.Minute, 20)
		old, err = st.ReplaceTemplate(ctx, v2, TemplateQuota{})
		if err != nil {
			t.Fatal(err)
		}
		if old == nil || old.ID != "tpl_1" || old.DeletedAt == nil || old.DeletedAt.Before(before.Add(-time.Second)) {
			t.Fatalf("ReplaceTemplate's old: got %+v, want tpl_1 removed now", old)
		}
		stored, err := st.GetTemplate(ctx, "tpl_1")
		if err != nil {
			t.Fatal(err)
		}
		sameTemplate(t, "the replaced template as stored", stored, old)
		got, err := st.TemplateByRef(ctx, "acme", template.Ref{Name: "app", Tag: "latest"})
		if err != nil || got.ID != "tpl_2" {
			t.Fatalf("acme app after the replace: got %v, %v, want tpl_2", got, err)
		}
		if n, size, err := st.TemplateUsage(ctx, "acme"); n != 1 || size != 20 || err != nil {
			t.Fatalf("usage: got %d, %d, %v, want 1 template of 20 bytes", n, size, err)
		}
		// A replace whose id is taken changes nothing.
		_, err = st.ReplaceTemplate(ctx, tpl("tpl_1", "acme", "app", 2*time.Minute, 1), TemplateQuota{})
		wantKind(t, "replace with a taken id", err, sandbox.KindConflict)
		if got, _ := st.TemplateByRef(ctx, "acme", template.Ref{Name: "app", Tag: "latest"}); got == nil || got.ID != "tpl_2" {
			t.Fatalf("acme app after a refused replace: got %v, want tpl_2", got)
		}
	})
}

func TestTemplateByRef(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		py := template.Ref{Name: "py", Tag: "3"}
		own := tpl("tpl_own", "acme", "py:3", 3, 1)
		first := tpl("tpl_first", "b", "py:3", 1, 1)
		second := tpl("tpl_second", "c", "py:3", 2, 1)
		first.Public, second.Public = true, true
		for _, tp := range []*template.Template{second, own, first} {
			mustPutTemplate(t, st, tp)
		}
		mustPutTemplate(t, st, tpl("tpl_private", "e", "py:3", 0, 1))
		lookup := func(account string) string {
			t.Helper()
			got, err := st.TemplateByRef(ctx, account, py)
			if errors.Is(err, sandbox.ErrNotFound) {
				return "not found"
			}
			if err != nil {
				t.Fatalf("TemplateByRef(%s): %v", account, err)
			}
			return got.ID
		}
		for _, tc := range []struct{ account, want string }{
			{"acme", "tpl_own"},     // its own before any public one
			{"c", "tpl_second"},     // its own, though public and newer
			{"d", "tpl_first"},      // the oldest public one
			{"", "tpl_first"},       // no account: public ones only
			{"e", "tpl_private"},    // its own private one
			{"a\x00b", "not found"}, // nothing a store cannot keep
		} {
			if got := lookup(tc.account); got != tc.want {
				t.Errorf("%q's py:3: got %s, want %s", tc.account, got, tc.want)
			}
		}
		if _, err := st.TemplateByRef(ctx, "d", template.Ref{Name: "py", Tag: "4"}); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("unknown py:4: got %v, want not found", err)
		}

		// Removed templates are found by id, never by name.
		if err := st.DeleteTemplate(ctx, "tpl_first", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got := lookup("d"); got != "tpl_second" {
			t.Errorf("after the oldest public one went: got %s, want tpl_second", got)
		}
		if err := st.SetTemplatePublic(ctx, "tpl_second", false); err != nil {
			t.Fatal(err)
		}
		if got := lookup("d"); got != "not found" {
			t.Errorf("after the last public one was taken back: got %s, want not found", got)
		}
		if err := st.DeleteTemplate(ctx, "tpl_own", t0.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got := lookup("acme"); got != "not found" {
			t.Errorf("acme's removed py:3: got %s, want not found", got)
		}
		got, err := st.GetTemplate(ctx, "tpl_own")
		if err != nil {
			t.Fatalf("removed template by id: %v", err)
		}
		if got.DeletedAt == nil || !got.DeletedAt.Equal(t0.Add(2*time.Hour)) || got.State() != template.StateDeleting {
			t.Errorf("removed template: DeletedAt %v, want %v", got.DeletedAt, t0.Add(2*time.Hour))
		}
		// A second delete keeps the first time; publishing a removed one
		// finds nothing.
		if err := st.DeleteTemplate(ctx, "tpl_own", t0.Add(3*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.GetTemplate(ctx, "tpl_own"); !got.DeletedAt.Equal(t0.Add(2 * time.Hour)) {
			t.Errorf("after a second delete: DeletedAt %v, want %v", got.DeletedAt, t0.Add(2*time.Hour))
		}
		if err := st.SetTemplatePublic(ctx, "tpl_own", true); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("publishing a removed template: got %v, want not found", err)
		}
		if got := lookup("d"); got != "not found" {
			t.Errorf("after publishing a removed template: got %s, want not found", got)
		}
		for _, id := range []string{"tpl_none", "a\x00b"} {
			if _, err := st.GetTemplate(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("GetTemplate(%q): got %v, want not found", id, err)
			}
			if err := st.DeleteTemplate(ctx, id, t0); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("DeleteTemplate(%q): got %v, want not found", id, err)
			}
			if err := st.SetTemplatePublic(ctx, id, true); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("SetTemplatePublic(%q): got %v, want not found", id, err)
			}
		}
	})
}

func TestListTemplates(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		pub := tpl("tpl_pub", "other", "base:1", 0, 1)
		pub.Public = true
		gonePub := tpl("tpl_gonepub", "other", "base:2", 0, 1)
		gonePub.Public = true
		for _, tp := range []*template.Template{
			tpl("tpl_z", "acme", "zeta", 0, 1),
			tpl("tpl_a2", "acme", "alpha:2", 0, 1),
			tpl("tpl_a1", "acme", "alpha:1", 0, 1),
			tpl("tpl_gone", "acme", "alpha:1", -time.Hour, 1),
			tpl("tpl_priv", "other", "alpha:1", 0, 1),
			pub, gonePub,
		} {
			if tp.ID == "tpl_gone" {
				// Its name is taken by tpl_a1 once it is removed.
				continue
			}
			mustPutTemplate(t, st, tp)
		}
		if err := st.DeleteTemplate(ctx, "tpl_a1", t0); err != nil {
			t.Fatal(err)
		}
		mustPutTemplate(t, st, tpl("tpl_a1new", "acme", "alpha:1", time.Hour, 1))
		if err := st.DeleteTemplate(ctx, "tpl_gonepub", t0); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			f    TemplateFilter
			want string
		}{
			{"acme", TemplateFilter{Account: "acme"}, "tpl_a1new tpl_a2 tpl_z"},
			{"acme and public", TemplateFilter{Account: "acme", Public: true}, "tpl_a1new tpl_a2 tpl_pub tpl_z"},
			{"acme with removed", TemplateFilter{Account: "acme", Deleted: true}, "tpl_a1 tpl_a1new tpl_a2 tpl_z"},
			{"acme, public, removed", TemplateFilter{Account: "acme", Public: true, Deleted: true}, "tpl_a1 tpl_a1new tpl_a2 tpl_pub tpl_z"},
			{"everyone", TemplateFilter{}, "tpl_a1new tpl_priv tpl_a2 tpl_pub tpl_z"},
			{"everyone with removed", TemplateFilter{Deleted: true}, "tpl_a1 tpl_a1new tpl_priv tpl_a2 tpl_pub tpl_gonepub tpl_z"},
			{"nobody", TemplateFilter{Account: "nobody"}, ""},
			{"nobody and public", TemplateFilter{Account: "nobody", Public: true}, "tpl_pub"},
		} {
			got, err := st.ListTemplates(ctx, tc.f)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if ids := templateIDs(got); ids != tc.want {
				t.Errorf("%s: got %q, want %q", tc.name, ids, tc.want)
			}
		}
	})
}

func TestTemplateQuota(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		wantQuota := func(what string, err error) {
			t.Helper()
			wantKind(t, what, err, sandbox.KindForbidden)
			if !errors.Is(err, ErrTemplateQuota) {
				t.Fatalf("%s: got %v, want ErrTemplateQuota", what, err)
			}
		}
		usage := func(wantN int, wantBytes int64) {
			t.Helper()
			n, size, err := st.TemplateUsage(ctx, "acme")
			if err != nil || n != wantN || size != wantBytes {
				t.Fatalf("usage: got %d, %d, %v, want %d templates of %d bytes", n, size, err, wantN, wantBytes)
			}
		}
		count := TemplateQuota{MaxCount: 2}
		if err := st.PutTemplate(ctx, tpl("tpl_1", "acme", "a", 0, 60), count); err != nil {
			t.Fatal(err)
		}
		if err := st.PutTemplate(ctx, tpl("tpl_2", "acme", "b", 0, 40), count); err != nil {
			t.Fatalf("the second of two: %v", err)
		}
		wantQuota("a third of two", st.PutTemplate(ctx, tpl("tpl_3", "acme", "c", 0, 1), count))
		_, err := st.ReplaceTemplate(ctx, tpl("tpl_3", "acme", "c", 0, 1), count)
		wantQuota("a third of two, by replace", err)
		usage(2, 100)
		// A replace at the bound: the replaced one does not count.
		if _, err := st.ReplaceTemplate(ctx, tpl("tpl_1b", "acme", "a", 1, 60), count); err != nil {
			t.Fatalf("replace at the count bound: %v", err)
		}
		// Another account has its own count.
		if err := st.PutTemplate(ctx, tpl("tpl_o", "other", "c", 0, 1000), count); err != nil {
			t.Fatal(err)
		}
		usage(2, 100)

		bytes := TemplateQuota{MaxBytes: 101}
		if err := st.PutTemplate(ctx, tpl("tpl_4", "acme", "d", 0, 1), bytes); err != nil {
			t.Fatalf("to exactly the byte bound: %v", err)
		}
		usage(3, 101)
		wantQuota("one byte past the bound", st.PutTemplate(ctx, tpl("tpl_5", "acme", "e", 0, 1), bytes))
		// Replacing the 60 bytes of a with 60 fits; with 61 it does not.
		_, err = st.ReplaceTemplate(ctx, tpl("tpl_1c", "acme", "a", 2, 61), bytes)
		wantQuota("a replace one byte past the bound", err)
		if got, _ := st.TemplateByRef(ctx, "acme", template.Ref{Name: "a", Tag: "latest"}); got == nil || got.ID != "tpl_1b" {
			t.Fatalf("a after a refused replace: got %v, want tpl_1b still", got)
		}
		if _, err := st.ReplaceTemplate(ctx, tpl("tpl_1c", "acme", "a", 2, 60), bytes); err != nil {
			t.Fatalf("a replace to exactly the bound: %v", err)
		}
		usage(3, 101)
		// Removing one frees its share.
		if err := st.DeleteTemplate(ctx, "tpl_4", t0); err != nil {
			t.Fatal(err)
		}
		usage(2, 100)
		if err := st.PutTemplate(ctx, tpl("tpl_5", "acme", "e", 0, 1), TemplateQuota{MaxCount: 3, MaxBytes: 101}); err != nil {
			t.Fatalf("after a delete: %v", err)
		}
	})
}

func TestTemplatePurge(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		mustPutTemplate(t, st, tpl("tpl_1", "acme", "app", 0, 1))
		wantKind(t, "purging a live template", st.PurgeTemplate(ctx, "tpl_1"), sandbox.KindConflict)
		if _, err := st.GetTemplate(ctx, "tpl_1"); err != nil {
			t.Fatalf("after a refused purge: %v", err)
		}
		if _, err := st.ReplaceTemplate(ctx, tpl("tpl_2", "acme", "app", 1, 1), TemplateQuota{}); err != nil {
			t.Fatal(err)
		}
		if err := st.PurgeTemplate(ctx, "tpl_1"); err != nil {
			t.Fatalf("purging the replaced template: %v", err)
		}
		if _, err := st.GetTemplate(ctx, "tpl_1"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("purged template: got %v, want not found", err)
		}
		if err := st.PurgeTemplate(ctx, "tpl_1"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("a second purge: got %v, want not found", err)
		}
		got, err := st.ListTemplates(ctx, TemplateFilter{Deleted: true})
		if err != nil || templateIDs(got) != "tpl_2" {
			t.Fatalf("after the purge: got %q, %v, want tpl_2", templateIDs(got), err)
		}
		// The purged id may be used again.
		mustPutTemplate(t, st, tpl("tpl_1", "acme", "other", 2, 1))
	})
}

// TestTemplateRace: racing writers of one name:tag, from one store or
// (Postgres) from many processes, leave one live template of it.
func TestTemplateRace(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		const n = 8
		run := func(f func(i int) error) []error {
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { errs[i] = f(i) })
			}
			wg.Wait()
			return errs
		}
		// Puts of one name: exactly one wins, the others are conflicts.
		errs := run(func(i int) error {
			return st.PutTemplate(ctx, tpl(fmt.Sprintf("tpl_put%d", i), "acme", "app", 0, 1), TemplateQuota{})
		})
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case sandbox.KindOf(err) != sandbox.KindConflict:
				t.Errorf("a losing put: got %v, want a conflict", err)
			}
		}
		if wins != 1 {
			t.Fatalf("%d of %d racing puts of acme app won, want 1", wins, n)
		}
		// Replaces of one name: all win, in turn, and one is live after.
		errs = run(func(i int) error {
			_, err := st.ReplaceTemplate(ctx, tpl(fmt.Sprintf("tpl_rep%d", i), "acme", "app", 0, 1), TemplateQuota{})
			return err
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("replace %d: %v", i, err)
			}
		}
		all, err := st.ListTemplates(ctx, TemplateFilter{Account: "acme", Deleted: true})
		if err != nil {
			t.Fatal(err)
		}
		live := 0
		for _, tp := range all {
			if tp.DeletedAt == nil {
				live++
			}
		}
		if len(all) != n+1 || live != 1 {
			t.Fatalf("after %d racing replaces: %d templates, %d live, want %d and 1", n, len(all), live, n+1)
		}
		// Puts of other names under a count quota: the quota holds.
		errs = run(func(i int) error {
			return st.PutTemplate(ctx, tpl(fmt.Sprintf("tpl_q%d", i), "acme", fmt.Sprintf("q%d", i), 0, 1), TemplateQuota{MaxCount: 4})
		})
		wins = 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, ErrTemplateQuota):
				t.Errorf("a refused put: got %v, want the quota's", err)
			}
		}
		if c, _, _ := st.TemplateUsage(ctx, "acme"); wins != 3 || c != 4 {
			t.Fatalf("racing puts under a quota of 4 (1 held): %d won and %d live, want 3 and 4", wins, c)
		}
	})
}

func TestTemplatesReopened(t *testing.T) {
	eachStoreReopened(t, func(t *testing.T, st Store, reopen func() Store) {
		ctx := context.Background()
		a := tpl("tpl_a", "acme", "app:v1", 0, 10)
		a.Public = true
		mustPutTemplate(t, st, a)
		mustPutTemplate(t, st, tpl("tpl_b", "acme", "app:v2", 1, 20))
		if err := st.DeleteTemplate(ctx, "tpl_b", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		st = reopen()
		got, err := st.GetTemplate(ctx, "tpl_a")
		if err != nil {
			t.Fatal(err)
		}
		sameTemplate(t, "tpl_a after a reopen", got, a)
		if got, err := st.TemplateByRef(ctx, "someone", template.Ref{Name: "app", Tag: "v1"}); err != nil || got.ID != "tpl_a" {
			t.Fatalf("the public app:v1 after a reopen: got %v, %v", got, err)
		}
		got, err = st.GetTemplate(ctx, "tpl_b")
		if err != nil || got.DeletedAt == nil {
			t.Fatalf("the removed tpl_b after a reopen: got %+v, %v", got, err)
		}
		if n, size, err := st.TemplateUsage(ctx, "acme"); n != 1 || size != 10 || err != nil {
			t.Fatalf("usage after a reopen: got %d, %d, %v, want 1 of 10 bytes", n, size, err)
		}
		// The name index survived too: the name is still taken.
		wantKind(t, "app:v1 again after a reopen", st.PutTemplate(ctx, tpl("tpl_c", "acme", "app:v1", 2, 1), TemplateQuota{}), sandbox.KindConflict)
	})
}
