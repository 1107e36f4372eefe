package storagequota

import (
	"context"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestCheck: every source counts, past the quota is forbidden, at it is
// not, and no quota allows all.
func TestCheck(t *testing.T) {
	q := New(1)
	q.Add("volumes", func(context.Context, string) (int64, error) { return 512 << 20, nil })
	q.Add("snapshots", func(context.Context, string) (int64, error) { return 256 << 20, nil })
	if err := q.Check(t.Context(), "a", 256<<20); err != nil {
		t.Fatalf("at the quota: %v", err)
	}
	if err := q.Check(t.Context(), "a", 256<<20+1); sandbox.KindOf(err) != sandbox.KindForbidden {
		t.Fatalf("past it: %v, want forbidden", err)
	}
	if err := New(0).Check(t.Context(), "a", 1<<50); err != nil {
		t.Fatalf("no quota: %v", err)
	}
	var nilQ *Quota
	if err := nilQ.Check(t.Context(), "a", 1); err != nil {
		t.Fatal(err)
	}
}
