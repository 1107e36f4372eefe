package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// TestEventLog: events get increasing Seqs, are listed by account after a
// cursor, outlive a reopen (Seqs go on from where they were) and are
// pruned by age.
func TestEventLog(t *testing.T) {
	eachStoreReopened(t, func(t *testing.T, st Store, reopen func() Store) {
		ctx := context.Background()
		old := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Millisecond)
		var seqs []int64
		for i, acct := range []string{"a", "b", "a", "a"} {
			e := &Event{Account: acct, Type: "sandbox.created", Subject: fmt.Sprintf("sb%d", i), Data: []byte(`{"n":1}`)}
			if i == 0 {
				e.At = old
			}
			if err := st.AppendEvent(ctx, e); err != nil {
				t.Fatal(err)
			}
			if len(seqs) > 0 && e.Seq <= seqs[len(seqs)-1] {
				t.Fatalf("seq %d after %d", e.Seq, seqs[len(seqs)-1])
			}
			seqs = append(seqs, e.Seq)
		}
		got, err := st.ListEvents(ctx, "a", 0, 100)
		if err != nil || len(got) != 3 || got[0].Subject != "sb0" || got[2].Subject != "sb3" || string(got[1].Data) != `{"n": 1}` && string(got[1].Data) != `{"n":1}` {
			t.Fatalf("ListEvents a = %+v, %v", got, err)
		}
		if got, _ := st.ListEvents(ctx, "a", seqs[0], 1); len(got) != 1 || got[0].Seq != seqs[2] {
			t.Fatalf("ListEvents after %d limit 1 = %+v", seqs[0], got)
		}
		if got, _ := st.ListEvents(ctx, "", 0, 100); len(got) != 4 {
			t.Fatalf("every account's events: %d, want 4", len(got))
		}
		if n, err := st.LastEventSeq(ctx); err != nil || n != seqs[3] {
			t.Fatalf("LastEventSeq = %d, %v; want %d", n, err, seqs[3])
		}
		st = reopen()
		e := &Event{Account: "a", Type: "sandbox.ended", Subject: "sb9"}
		if err := st.AppendEvent(ctx, e); err != nil || e.Seq <= seqs[3] {
			t.Fatalf("append after reopen: seq %d (last %d), %v", e.Seq, seqs[3], err)
		}
		ne, _, err := st.PruneEvents(ctx, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
		if err != nil || ne != 1 {
			t.Fatalf("PruneEvents = %d, %v; want 1", ne, err)
		}
		if got, _ := st.ListEvents(ctx, "a", 0, 100); len(got) != 3 || got[0].Subject != "sb2" {
			t.Fatalf("after prune: %+v", got)
		}
	})
}

// TestWebhooks: registrations are bounded per account, start their cursor
// at the last event, advance it only forward, keep a bounded delivery log
// and are removed with it, by their account only.
func TestWebhooks(t *testing.T) {
	eachStoreReopened(t, func(t *testing.T, st Store, reopen func() Store) {
		ctx := context.Background()
		e := &Event{Account: "a", Type: "sandbox.created", Subject: "x"}
		if err := st.AppendEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		for i := range 2 {
			w := &Webhook{ID: fmt.Sprintf("wh%d", i), Account: "a", URL: "https://example.test/h", Events: []string{"sandbox.created"}, Secret: "whsec_x", CreatedAt: now.Add(time.Duration(i) * time.Second)}
			if err := st.PutWebhook(ctx, w, 2); err != nil {
				t.Fatal(err)
			}
			if w.Cursor != e.Seq {
				t.Fatalf("new webhook's cursor %d, want the last event's %d", w.Cursor, e.Seq)
			}
		}
		err := st.PutWebhook(ctx, &Webhook{ID: "wh9", Account: "a", CreatedAt: now}, 2)
		if sandbox.KindOf(err) != sandbox.KindForbidden {
			t.Fatalf("third webhook of a bound of 2: %v, want forbidden", err)
		}
		if err := st.PutWebhook(ctx, &Webhook{ID: "wh0", Account: "b", CreatedAt: now}, 2); sandbox.KindOf(err) != sandbox.KindConflict {
			t.Fatalf("a taken id: %v, want conflict", err)
		}
		if err := st.PutWebhook(ctx, &Webhook{ID: "wh5", Account: "b", CreatedAt: now}, 2); err != nil {
			t.Fatal(err)
		}
		for i := range MaxDeliveries + 3 {
			d := &Delivery{EventSeq: int64(i), EventType: "sandbox.created", Status: DeliveryDelivered, Attempts: 1, At: now}
			if err := st.AdvanceWebhook(ctx, "wh0", e.Seq+int64(i), d); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.AdvanceWebhook(ctx, "wh0", 1, nil); err != nil {
			t.Fatal(err)
		}
		st = reopen()
		w, err := st.GetWebhook(ctx, "wh0")
		if err != nil || w.Cursor != e.Seq+MaxDeliveries+2 || w.URL != "https://example.test/h" || w.Secret != "whsec_x" || !w.Wants("sandbox.created") || w.Wants("sandbox.ended") {
			t.Fatalf("GetWebhook = %+v, %v", w, err)
		}
		ds, err := st.ListDeliveries(ctx, "wh0", 1000)
		if err != nil || len(ds) != MaxDeliveries || ds[0].EventSeq != MaxDeliveries+2 || ds[0].Webhook != "wh0" {
			t.Fatalf("deliveries: %d (newest %+v), %v; want %d, newest first", len(ds), ds[0], err, MaxDeliveries)
		}
		if ws, err := st.ListWebhooks(ctx, "a"); err != nil || len(ws) != 2 || ws[0].ID != "wh0" || ws[1].ID != "wh1" {
			t.Fatalf("ListWebhooks a = %+v, %v", ws, err)
		}
		if ws, _ := st.ListWebhooks(ctx, ""); len(ws) != 3 {
			t.Fatalf("every webhook: %d, want 3", len(ws))
		}
		if err := st.DeleteWebhook(ctx, "b", "wh0"); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Fatalf("another account's delete: %v, want not_found", err)
		}
		if err := st.DeleteWebhook(ctx, "a", "wh0"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetWebhook(ctx, "wh0"); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Fatalf("deleted webhook: %v", err)
		}
		if ds, _ := st.ListDeliveries(ctx, "wh0", 10); len(ds) != 0 {
			t.Fatalf("a deleted webhook's deliveries stay: %d", len(ds))
		}
		if err := st.AdvanceWebhook(ctx, "wh0", 99, nil); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Fatalf("advance of a deleted webhook: %v", err)
		}
	})
}

// TestAudit: entries are kept in order, listed from a time, and pruned by
// their retention.
func TestAudit(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		old := time.Now().UTC().Add(-100 * 24 * time.Hour).Truncate(time.Millisecond)
		for i, at := range []time.Time{old, {}, {}} {
			a := &AuditEntry{At: at, Account: "a", KeyID: "k1", Action: fmt.Sprintf("act%d", i), Target: "sb", Remote: "192.0.2.1"}
			if err := st.AppendAudit(ctx, a); err != nil || a.Seq == 0 {
				t.Fatalf("AppendAudit: %+v, %v", a, err)
			}
		}
		got, err := st.ListAudit(ctx, time.Time{}, 100)
		if err != nil || len(got) != 3 || got[0].Action != "act0" || got[2].Action != "act2" || got[1].KeyID != "k1" || got[1].Remote != "192.0.2.1" {
			t.Fatalf("ListAudit = %+v, %v", got, err)
		}
		if got, _ := st.ListAudit(ctx, time.Now().Add(-time.Hour), 1); len(got) != 1 || got[0].Action != "act1" {
			t.Fatalf("ListAudit since an hour ago, limit 1 = %+v", got)
		}
		if _, na, err := st.PruneEvents(ctx, time.Time{}, time.Now().Add(-90*24*time.Hour)); err != nil || na != 1 {
			t.Fatalf("PruneEvents audit = %d, %v; want 1", na, err)
		}
	})
}

// TestEventSource: a store given an event source appends, in the write's
// own transaction, the event it makes of each sandbox write (handing it
// the record replaced) and template insert; the source hears each after
// the commit. When the event cannot be made, the write itself does not
// happen: the record keeps its version and the ledger its sums.
func TestEventSource(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		var fail error
		var prevs []string
		heard := 0
		st.SetEventSource(EventSource{
			Sandbox: func(old, r *sandbox.Record) (*Event, error) {
				if fail != nil {
					return nil, fail
				}
				prev := "none"
				if old != nil {
					prev = string(old.State)
				}
				prevs = append(prevs, prev)
				if old != nil && old.State == r.State {
					return nil, nil
				}
				return &Event{Account: r.Account, Type: "sandbox." + string(r.State), Subject: r.ID}, nil
			},
			Template: func(tp *template.Template) (*Event, error) {
				return &Event{Account: tp.Account, Type: "template.built", Subject: tp.ID}, nil
			},
			Appended: func() { heard++ },
		})
		r := &sandbox.Record{ID: "sb1", Account: "a", State: sandbox.StateStarting}
		if err := st.PutSandbox(ctx, r); err != nil {
			t.Fatal(err)
		}
		r.State = sandbox.StateRunning
		if err := st.AdmitSandbox(ctx, r, 5); err != nil {
			t.Fatal(err)
		}
		day := UsageDelta{Day: "2026-12-05", Account: "a", KeyID: "k", AliveMs: 10}
		if err := st.RecordUsage(ctx, r, day); err != nil { // no change of state: no event
			t.Fatal(err)
		}
		fail = errors.New("no event")
		r.State = sandbox.StateEnded
		v := r.Version
		if err := st.RecordUsage(ctx, r, day); err == nil {
			t.Fatal("a write whose event failed was taken")
		}
		if r.Version != v {
			t.Fatalf("version %d after a refused write, want %d", r.Version, v)
		}
		if got, _ := st.GetSandbox(ctx, "sb1"); got.State != sandbox.StateRunning || got.Version != v {
			t.Fatalf("stored %s v%d after a refused write, want running v%d", got.State, got.Version, v)
		}
		if rows, _ := st.Usage(ctx, UsageFilter{Account: "a"}); len(rows) != 1 || rows[0].AliveMs != 10 {
			t.Fatalf("ledger %+v after a refused write, want 10 ms", rows)
		}
		fail = nil
		if err := st.PutSandbox(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := st.PutTemplate(ctx, tpl("tpl_e", "a", "app:v1", 0, 1), TemplateQuota{}); err != nil {
			t.Fatal(err)
		}
		events, err := st.ListEvents(ctx, "a", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range events {
			got = append(got, e.Subject+":"+e.Type)
		}
		want := []string{"sb1:sandbox.starting", "sb1:sandbox.running", "sb1:sandbox.ended", "tpl_e:template.built"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		if wantPrevs := "[none starting running running]"; fmt.Sprint(prevs) != wantPrevs {
			t.Errorf("the source was handed %v as the records replaced, want %s", prevs, wantPrevs)
		}
		if heard != len(want) {
			t.Errorf("the source heard of %d appends, want %d", heard, len(want))
		}
	})
}
