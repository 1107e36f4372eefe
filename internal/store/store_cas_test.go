package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

func wantStale(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrStale) {
		t.Fatalf("%s: got %v, want ErrStale", what, err)
	}
	if k := sandbox.KindOf(err); k != sandbox.KindConflict {
		t.Errorf("%s: kind %s, want %s", what, k, sandbox.KindConflict)
	}
}

func mustGet(t *testing.T, st Store, id string) *sandbox.Record {
	t.Helper()
	r, err := st.GetSandbox(context.Background(), id)
	if err != nil {
		t.Fatalf("GetSandbox(%s): %v", id, err)
	}
	return r
}

func TestSandboxVersions(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		r := record("sb_1", "acme", sandbox.StateStarting, t0)
		if err := st.PutSandbox(ctx, r); err != nil {
			t.Fatalf("insert: %v", err)
		}
		if r.Version != 1 {
			t.Fatalf("version after insert: got %d, want 1", r.Version)
		}
		if got := mustGet(t, st, "sb_1").Version; got != 1 {
			t.Fatalf("stored version: got %d, want 1", got)
		}

		stale := *r
		r.State = sandbox.StateRunning
		if err := st.PutSandbox(ctx, r); err != nil {
			t.Fatalf("update: %v", err)
		}
		if r.Version != 2 {
			t.Fatalf("version after update: got %d, want 2", r.Version)
		}

		stale.State = sandbox.StateEnded
		wantStale(t, "write of version 1 over version 2", st.PutSandbox(ctx, &stale))
		if stale.Version != 1 {
			t.Errorf("refused write moved the caller's version: got %d, want 1", stale.Version)
		}
		again := record("sb_1", "acme", sandbox.StateEnded, t0)
		wantStale(t, "insert of an existing id", st.PutSandbox(ctx, again))
		got := mustGet(t, st, "sb_1")
		if got.State != sandbox.StateRunning || got.Version != 2 {
			t.Fatalf("after refused writes: got %s version %d, want running version 2", got.State, got.Version)
		}
		// The live index follows only the writes that happened.
		live, err := st.ListSandboxes(ctx, SandboxFilter{States: []sandbox.State{sandbox.StateRunning}})
		if err != nil || len(live) != 1 {
			t.Fatalf("running records: got %d (%v), want 1", len(live), err)
		}

		gone := record("sb_gone", "acme", sandbox.StateRunning, t0)
		gone.Version = 3
		wantStale(t, "update of an absent record", st.PutSandbox(ctx, gone))
		if _, err := st.GetSandbox(ctx, "sb_gone"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("absent record after a refused update: got %v, want not_found", err)
		}

		// The version read is the one to write with.
		read := mustGet(t, st, "sb_1")
		read.State = sandbox.StateEnded
		if err := st.PutSandbox(ctx, read); err != nil {
			t.Fatalf("write of the read version: %v", err)
		}
		if read.Version != 3 {
			t.Errorf("version: got %d, want 3", read.Version)
		}
	})
}

func TestRecordUsageStale(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		r := record("sb_1", "acme", sandbox.StateRunning, t0)
		if err := st.PutSandbox(ctx, r); err != nil {
			t.Fatal(err)
		}
		stale := *r
		d := UsageDelta{Day: "2026-03-01", Account: "acme", KeyID: "key_1", AliveMs: 1000, CostNanos: 7}
		r.Usage.AliveMs = 1000
		if err := st.RecordUsage(ctx, r, d); err != nil {
			t.Fatalf("RecordUsage: %v", err)
		}
		if r.Version != 2 {
			t.Fatalf("version after RecordUsage: got %d, want 2", r.Version)
		}
		stale.Usage.AliveMs = 5000
		wantStale(t, "stale RecordUsage", st.RecordUsage(ctx, &stale, UsageDelta{Day: "2026-03-01", Account: "acme", KeyID: "key_1", AliveMs: 5000, CostNanos: 99}))
		rows, err := st.Usage(ctx, UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []UsageRow{d}; !reflect.DeepEqual(rows, want) {
			t.Fatalf("ledger after a stale bill: got %+v, want %+v", rows, want)
		}
		if got := mustGet(t, st, "sb_1"); got.Usage.AliveMs != 1000 || got.Version != 2 {
			t.Fatalf("record after a stale bill: alive %d version %d, want 1000 and 2", got.Usage.AliveMs, got.Version)
		}

		// A write that fails for another reason keeps the caller's version.
		err = st.RecordUsage(ctx, r, UsageDelta{Account: "acme", AliveMs: 1})
		if sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Fatalf("delta without a day: got %v, want invalid_request", err)
		}
		if r.Version != 2 {
			t.Fatalf("version after a failed RecordUsage: got %d, want 2", r.Version)
		}
		if err := st.RecordUsage(ctx, r, UsageDelta{}); err != nil {
			t.Fatalf("RecordUsage after a failed one: %v", err)
		}
		if r.Version != 3 {
			t.Errorf("version: got %d, want 3", r.Version)
		}
	})
}

// TestOldRecordsWritable: a record stored before records had versions reads
// as version 0 and takes a write of version 0.
func TestOldRecordsWritable(t *testing.T) {
	old := record("sb_old", "acme", sandbox.StateRunning, t0)
	data, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(data, &m)
	delete(m, "version")
	data, _ = json.Marshal(m)

	b, _ := openTest(t)
	err = b.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketSandboxes).Put([]byte(old.ID), data); err != nil {
			return err
		}
		return tx.Bucket(bucketLive).Put([]byte(old.ID), nil)
	})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	r := mustGet(t, b, "sb_old")
	if r.Version != 0 {
		t.Fatalf("version of an old record: got %d, want 0", r.Version)
	}
	r.State = sandbox.StateEnded
	if err := b.PutSandbox(ctx, r); err != nil {
		t.Fatalf("write of an old record: %v", err)
	}
	if got := mustGet(t, b, "sb_old"); got.Version != 1 || got.State != sandbox.StateEnded {
		t.Fatalf("after the write: got %s version %d, want ended version 1", got.State, got.Version)
	}
}

func TestAdmitSandbox(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		put := func(id, account string, s sandbox.State) *sandbox.Record {
			r := record(id, account, s, t0)
			if err := st.PutSandbox(ctx, r); err != nil {
				t.Fatal(err)
			}
			return r
		}
		put("a_running", "acme", sandbox.StateRunning)
		put("a_starting", "acme", sandbox.StateStarting)
		paused := put("a_paused", "acme", sandbox.StatePaused)
		put("a_ended", "acme", sandbox.StateEnded)
		put("b_running", "other", sandbox.StateRunning)

		n1 := record("a_new1", "acme", sandbox.StateStarting, t0)
		err := st.AdmitSandbox(ctx, n1, 2)
		if k := sandbox.KindOf(err); k != sandbox.KindConcurrency {
			t.Fatalf("admit over the limit: got %v, want %s", err, sandbox.KindConcurrency)
		}
		if n1.Version != 0 {
			t.Errorf("refused admission moved the version to %d", n1.Version)
		}
		if _, err := st.GetSandbox(ctx, "a_new1"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("refused record: got %v, want not_found", err)
		}

		// Paused, ended and other accounts' records do not count.
		if err := st.AdmitSandbox(ctx, n1, 3); err != nil {
			t.Fatalf("admit within the limit: %v", err)
		}
		if n1.Version != 1 {
			t.Fatalf("version after admission: got %d, want 1", n1.Version)
		}
		// The record itself does not count against its own admission.
		n1.State = sandbox.StateRunning
		if err := st.AdmitSandbox(ctx, n1, 3); err != nil {
			t.Fatalf("admit of an admitted record at the limit: %v", err)
		}
		if got := mustGet(t, st, "a_new1"); got.State != sandbox.StateRunning || got.Version != 2 {
			t.Fatalf("re-admitted record: got %s version %d, want running version 2", got.State, got.Version)
		}

		// A paused record that resumes is admitted like a new one.
		paused.State = sandbox.StateStarting
		if err := st.AdmitSandbox(ctx, paused, 3); sandbox.KindOf(err) != sandbox.KindConcurrency {
			t.Fatalf("resume over the limit: got %v, want %s", err, sandbox.KindConcurrency)
		}
		if got := mustGet(t, st, "a_paused"); got.State != sandbox.StatePaused {
			t.Fatalf("refused resume: got %s, want paused", got.State)
		}

		// Limit 0 is no limit.
		if err := st.AdmitSandbox(ctx, record("a_new2", "acme", sandbox.StateStarting, t0), 0); err != nil {
			t.Fatalf("admit with limit 0: %v", err)
		}
		// Admission is a conditional write too.
		stale := record("a_new2", "acme", sandbox.StateStarting, t0)
		wantStale(t, "admit of an existing id", st.AdmitSandbox(ctx, stale, 0))
	})
}

// TestAdmitSandboxRace: of many admissions at once, exactly the limit win.
func TestAdmitSandboxRace(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		const tries, limit = 8, 3
		errs := make([]error, tries)
		var wg sync.WaitGroup
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := record("race_"+string(rune('a'+i)), "acme", sandbox.StateStarting, t0)
				errs[i] = st.AdmitSandbox(context.Background(), r, limit)
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case sandbox.KindOf(err) != sandbox.KindConcurrency:
				t.Errorf("admission: got %v, want nil or %s", err, sandbox.KindConcurrency)
			}
		}
		if won != limit {
			t.Fatalf("admitted: got %d, want %d", won, limit)
		}
	})
}

func TestListSandboxesNodeFilter(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		for _, r := range []struct {
			id, node string
			state    sandbox.State
		}{
			{"sb_1", "node1", sandbox.StateRunning},
			{"sb_2", "node2", sandbox.StateRunning},
			{"sb_3", "node1", sandbox.StateEnded},
			{"sb_4", "", sandbox.StateRunning},
		} {
			rec := record(r.id, "acme", r.state, t0)
			rec.Node = r.node
			if err := st.PutSandbox(ctx, rec); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			f    SandboxFilter
			want []string
		}{
			{SandboxFilter{Node: "node1"}, []string{"sb_1", "sb_3"}},
			{SandboxFilter{Node: "node1", States: []sandbox.State{sandbox.StateRunning}}, []string{"sb_1"}},
			{SandboxFilter{Node: "node2", Account: "acme"}, []string{"sb_2"}},
			{SandboxFilter{Node: "node3"}, nil},
			{SandboxFilter{}, []string{"sb_1", "sb_2", "sb_3", "sb_4"}},
		} {
			got, err := st.ListSandboxes(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range got {
				ids = append(ids, r.ID)
			}
			if !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("ListSandboxes(%+v): got %v, want %v", tc.f, ids, tc.want)
			}
		}
	})
}
