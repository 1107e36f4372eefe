package store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestConcurrentUse is for -race: every store is safe for concurrent use,
// its ledger adds up what concurrent bills add, and what a caller gets is
// its own copy.
func TestConcurrentUse(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := t.Context()
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := record(fmt.Sprintf("sbx-%d", i), "acct", sandbox.StateRunning, t0)
				for j := range 50 {
					rec.Usage.AliveMs = int64(j)
					if err := s.RecordUsage(ctx, rec, UsageDelta{Day: "2026-03-01", Account: "acct", AliveMs: 1}); err != nil {
						t.Error(err)
						return
					}
					got, err := s.GetSandbox(ctx, rec.ID)
					if err != nil {
						t.Error(err)
						return
					}
					got.Spec.Env["A"] = "changed"
					if _, err := s.ListSandboxes(ctx, SandboxFilter{}); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		rows, _ := s.Usage(ctx, UsageFilter{})
		if len(rows) != 1 || rows[0].AliveMs != 8*50 {
			t.Errorf("ledger: got %+v, want one row of %d ms", rows, 8*50)
		}
		got, _ := s.GetSandbox(ctx, "sbx-0")
		if got.Spec.Env["A"] != "b" {
			t.Errorf("a caller's change reached the store: env A is %q, want b", got.Spec.Env["A"])
		}
	})
}
