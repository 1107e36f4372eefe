package manager

import (
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// TestDailyLimitsHoldDownTheKeyTree: what keys made through a key spend
// counts against its limit, and a key spends within every limit above it,
// removed keys included.
func TestDailyLimitsHoldDownTheKeyTree(t *testing.T) {
	st := storetest.OpenBolt(t)
	now := time.Date(2026, 3, 2, 15, 0, 0, 0, time.UTC)
	m := &Manager{cfg: Config{Store: st, Now: func() time.Time { return now }}}
	ctx := t.Context()
	for _, k := range []store.Key{
		{ID: "top", DailyLimitMicros: 100},
		{ID: "c1", Parent: "top", DailyLimitMicros: 50},
		{ID: "c2", Parent: "top", DailyLimitMicros: 100},
		{ID: "g1", Parent: "c1", DailyLimitMicros: 50},
		{ID: "gone", Parent: "c2", DailyLimitMicros: 100},
		{ID: "free"},
	} {
		sum := sha256.Sum256([]byte(k.ID))
		k.Account, k.Kind, k.Hash, k.CreatedAt = "a", store.KeyFull, sum[:], now
		if err := st.PutKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.DeleteKey(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	spend := func(day, key string, micros int64) {
		r := &sandbox.Record{ID: "sbx-" + key + day, Account: "a", KeyID: key, State: sandbox.StateEnded}
		if err := st.RecordUsage(ctx, r, store.UsageDelta{Day: day, Account: "a", KeyID: key, CostNanos: micros * 1000}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(key, want string) {
		t.Helper()
		_, err := m.checkMoney(ctx, "a", key, sandbox.Spec{}, 0)
		if want == "" {
			if err != nil {
				t.Errorf("key %s: got %v, want allowed", key, err)
			}
			return
		}
		if sandbox.KindOf(err) != sandbox.KindSpendingLimit || !strings.Contains(sandbox.MessageOf(err), want) {
			t.Errorf("key %s: got %v, want spending_limit_reached saying %q", key, err, want)
		}
	}

	spend("2026-03-01", "g1", 1000) // yesterday's spending counts for nothing
	for _, k := range []string{"top", "c1", "c2", "g1", "free"} {
		check(k, "")
	}
	spend("2026-03-02", "g1", 50)
	check("g1", "this key's daily spending limit of 50 micros")
	check("c1", "this key's daily spending limit of 50 micros") // its child spent it
	check("c2", "")
	check("top", "")
	spend("2026-03-02", "gone", 50) // a removed key's spending still counts
	check("c2", "limit of 100 micros of key top, which this key was made through")
	check("top", "this key's daily spending limit of 100 micros")
	check("free", "")
}
