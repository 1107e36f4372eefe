package store

import (
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

func TestUsageLedger(t *testing.T) {
	eachStoreReopened(t, func(t *testing.T, st Store, reopen func() Store) {
		ctx := t.Context()
		rec := &sandbox.Record{ID: "sbx1", Account: "a", KeyID: "k1", State: sandbox.StateRunning}
		deltas := []UsageDelta{
			{Day: "2026-11-28", Account: "a", KeyID: "k1", AliveMs: 1000, CostNanos: 10},
			{Day: "2026-11-29", Account: "a", KeyID: "k1", AliveMs: 2000, CPUNs: 5, CostNanos: 20},
			{Day: "2026-11-29", Account: "a", KeyID: "k1", AliveMs: 500, CostNanos: 5},
			{Day: "2026-11-29", Account: "b", KeyID: "k2", AliveMs: 100, CostNanos: 1},
		}
		for i, d := range deltas {
			rec.Usage.AliveMs += d.AliveMs
			if err := st.RecordUsage(ctx, rec, d); err != nil {
				t.Fatalf("delta %d: %v", i, err)
			}
		}
		// Nothing to add still replaces the record.
		rec.State = sandbox.StateEnded
		if err := st.RecordUsage(ctx, rec, UsageDelta{}); err != nil {
			t.Fatal(err)
		}
		st = reopen()
		got, err := st.GetSandbox(ctx, "sbx1")
		if err != nil || got.State != sandbox.StateEnded || got.Usage.AliveMs != 3600 {
			t.Fatalf("record after reopen: got %+v, %v", got, err)
		}
		tests := []struct {
			name      string
			f         UsageFilter
			wantRows  int
			wantNanos int64
		}{
			{"everything", UsageFilter{}, 3, 36},
			{"one key one day", UsageFilter{KeyID: "k1", From: "2026-11-29", To: "2026-11-29"}, 1, 25},
			{"one account", UsageFilter{Account: "b"}, 1, 1},
			{"a range before", UsageFilter{To: "2026-11-28"}, 1, 10},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				rows, err := st.Usage(ctx, tt.f)
				if err != nil {
					t.Fatal(err)
				}
				var nanos int64
				for _, r := range rows {
					nanos += r.CostNanos
				}
				if len(rows) != tt.wantRows || nanos != tt.wantNanos {
					t.Fatalf("got %d rows, %d nanos; want %d, %d (%+v)", len(rows), nanos, tt.wantRows, tt.wantNanos, rows)
				}
			})
		}
	})
}
