package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestSnapshots stores, finds, lists by account (newest first), expires
// and removes snapshot records, in both stores.
func TestSnapshots(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
		snap := func(id, account string, ago time.Duration) *sandbox.Snapshot {
			return &sandbox.Snapshot{
				ID: id, Account: account, SandboxID: "sbx_" + id, SizeBytes: 1 << 20,
				Spec:      sandbox.Spec{Image: "default", MemoryMiB: 512, VCPUs: 1},
				CreatedAt: at.Add(-ago), ExpiresAt: at.Add(-ago).Add(24 * time.Hour),
			}
		}
		for _, s := range []*sandbox.Snapshot{snap("snap_a", "acme", 2*time.Hour), snap("snap_b", "acme", time.Hour), snap("snap_c", "other", 0)} {
			if err := st.PutSnapshot(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		wantKind(t, "a second snap_a", st.PutSnapshot(ctx, snap("snap_a", "other", 0)), sandbox.KindConflict)
		got, err := st.GetSnapshot(ctx, "snap_a")
		if err != nil || got.Account != "acme" || got.Spec.MemoryMiB != 512 || !got.CreatedAt.Equal(at.Add(-2*time.Hour)) {
			t.Fatalf("snap_a: got %+v, %v", got, err)
		}
		if _, err := st.GetSnapshot(ctx, "snap_zz"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("an unknown snapshot: got %v, want not found", err)
		}
		list, err := st.ListSnapshots(ctx, "acme")
		if err != nil || len(list) != 2 || list[0].ID != "snap_b" || list[1].ID != "snap_a" {
			t.Fatalf("acme's snapshots: got %v, %v, want snap_b then snap_a", list, err)
		}
		all, err := st.ListSnapshots(ctx, "")
		if err != nil || len(all) != 3 {
			t.Fatalf("every snapshot: got %d, %v", len(all), err)
		}
		old, err := st.ExpiredSnapshots(ctx, at.Add(22*time.Hour+30*time.Minute))
		if err != nil || len(old) != 1 || old[0].ID != "snap_a" {
			t.Fatalf("expired 22.5 h later: got %v, %v, want snap_a", old, err)
		}
		if err := st.DeleteSnapshot(ctx, "snap_a"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetSnapshot(ctx, "snap_a"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("a removed snapshot: got %v, want not found", err)
		}
		if err := st.DeleteSnapshot(ctx, "snap_a"); err != nil {
			t.Fatalf("removing it twice: %v", err)
		}
	})
}

// TestBillSnapshot: a snapshot's storage enters the ledger with its
// billed-until mark in one write; a biller that read an older mark
// changes neither; an unknown snapshot is not found; in both stores.
func TestBillSnapshot(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
		s := &sandbox.Snapshot{ID: "snap_bill", Account: "acme", KeyID: "key_1", SandboxID: "sbx_1", SizeBytes: 1 << 30,
			CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}
		if err := st.PutSnapshot(ctx, s); err != nil {
			t.Fatal(err)
		}
		delta := func(n int64) UsageDelta {
			return UsageDelta{Day: "2026-12-05", Account: "acme", KeyID: "key_1", CostNanos: n}
		}
		if err := st.BillSnapshot(ctx, "snap_bill", time.Time{}, at.Add(time.Hour), delta(1000)); err != nil {
			t.Fatal(err)
		}
		wantKind(t, "a stale mark", st.BillSnapshot(ctx, "snap_bill", time.Time{}, at.Add(2*time.Hour), delta(1000)), sandbox.KindConflict)
		if err := st.BillSnapshot(ctx, "snap_bill", at.Add(time.Hour), at.Add(2*time.Hour), delta(500)); err != nil {
			t.Fatal(err)
		}
		wantKind(t, "an unknown snapshot", st.BillSnapshot(ctx, "snap_none", time.Time{}, at, delta(1)), sandbox.KindNotFound)
		got, err := st.GetSnapshot(ctx, "snap_bill")
		if err != nil || !got.BilledUntil.Equal(at.Add(2*time.Hour)) || got.KeyID != "key_1" {
			t.Fatalf("billed snapshot: %+v %v", got, err)
		}
		rows, err := st.Usage(ctx, UsageFilter{Account: "acme"})
		if err != nil || len(rows) != 1 || rows[0].CostNanos != 1500 || rows[0].KeyID != "key_1" {
			t.Fatalf("ledger: %+v %v, want one row of 1500", rows, err)
		}
	})
}
