package store

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Here, not in memory.go: a method added to Store fails this test, not
// everyone's build.
var _ Store = (*Memory)(nil)

// TestMemoryDeleteKeyRemovesDescendants: the memory store removes a key's
// family as Bolt does (TestDeleteKeyRemovesDescendants).
func TestMemoryDeleteKeyRemovesDescendants(t *testing.T) {
	s := NewMemory()
	ctx := t.Context()
	for _, k := range family() {
		if err := s.PutKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteKey(ctx, "c1"); err != nil {
		t.Fatalf("DeleteKey: %v", err)
	}
	live, _ := s.ListKeys(ctx, "a")
	if got, want := ids(live), []string{"top", "c2", "other"}; !slices.Equal(got, want) {
		t.Errorf("live keys: got %v, want %v", got, want)
	}
	if _, err := s.KeyByHash(ctx, hashOf("g1")); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("secret of removed g1: got %v, want not_found", err)
	}
	all, _ := s.ListAllKeys(ctx, "a")
	if got, want := ids(all), []string{"top", "c1", "c2", "g1", "other"}; !slices.Equal(got, want) {
		t.Errorf("all keys: got %v, want %v", got, want)
	}
	for _, k := range all {
		removed := k.ID == "c1" || k.ID == "g1"
		if (k.RemovedAt != nil) != removed || removed && k.Hash != nil {
			t.Errorf("key %s: removed_at %v hash %x, want removed %v and no hash when removed", k.ID, k.RemovedAt, k.Hash, removed)
		}
	}
}

// TestMemoryConcurrent is for -race: the memory store is safe for
// concurrent use, and what a caller gets is its own copy.
func TestMemoryConcurrent(t *testing.T) {
	s := NewMemory()
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
}
