package store

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// family is an account's keys: top (limit 100 micros) made c1 (50) and c2
// (none); c1 made g1 (none); other is a separate key of the account.
func family() []Key {
	return []Key{
		{ID: "top", Account: "a", Kind: KeyFull, Hash: hashOf("top"), CreatedAt: t0, DailyLimitMicros: 100},
		{ID: "c1", Account: "a", Kind: KeyFull, Hash: hashOf("c1"), CreatedAt: t0.Add(1), Parent: "top", DailyLimitMicros: 50},
		{ID: "c2", Account: "a", Kind: KeyFull, Hash: hashOf("c2"), CreatedAt: t0.Add(2), Parent: "top"},
		{ID: "g1", Account: "a", Kind: KeyFull, Hash: hashOf("g1"), CreatedAt: t0.Add(3), Parent: "c1"},
		{ID: "other", Account: "a", Kind: KeyFull, Hash: hashOf("other"), CreatedAt: t0.Add(4)},
	}
}

func ids(keys []Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.ID)
	}
	return out
}

func TestKeyTreeWalks(t *testing.T) {
	tree := NewKeyTree(family())
	for _, tt := range []struct {
		id       string
		chain    []string
		subtree  []string
		dailyLim int64
	}{
		{"top", []string{"top"}, []string{"top", "c1", "c2", "g1"}, 100},
		{"c1", []string{"c1", "top"}, []string{"c1", "g1"}, 50},
		{"c2", []string{"c2", "top"}, []string{"c2"}, 100},
		{"g1", []string{"g1", "c1", "top"}, []string{"g1"}, 50},
		{"other", []string{"other"}, []string{"other"}, 0},
		{"nobody", nil, []string{"nobody"}, 0},
	} {
		if got := ids(tree.Chain(tt.id)); !slices.Equal(got, tt.chain) {
			t.Errorf("Chain(%s): got %v, want %v", tt.id, got, tt.chain)
		}
		got := tree.Subtree(tt.id)
		slices.Sort(got)
		want := slices.Clone(tt.subtree)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("Subtree(%s): got %v, want %v", tt.id, got, want)
		}
		if got := tree.DailyLimit(tt.id); got != tt.dailyLim {
			t.Errorf("DailyLimit(%s): got %d, want %d", tt.id, got, tt.dailyLim)
		}
	}
	for _, tt := range []struct {
		id, ancestor string
		want         bool
	}{{"g1", "top", true}, {"g1", "c1", true}, {"c1", "c1", false}, {"top", "c1", false}, {"c2", "c1", false}, {"other", "top", false}} {
		if got := tree.IsDescendant(tt.id, tt.ancestor); got != tt.want {
			t.Errorf("IsDescendant(%s, %s): got %v, want %v", tt.id, tt.ancestor, got, tt.want)
		}
	}
}

func TestKeyTreeCycleEnds(t *testing.T) {
	tree := NewKeyTree([]Key{{ID: "x", Parent: "y"}, {ID: "y", Parent: "x"}})
	if got := ids(tree.Chain("x")); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("Chain in a cycle: got %v, want [x y]", got)
	}
	if got := len(tree.Subtree("x")); got != 2 {
		t.Errorf("Subtree in a cycle: got %d keys, want 2", got)
	}
}

func TestKeyTreeOverLimit(t *testing.T) {
	tree := NewKeyTree(family())
	const micro = 1000 // nanos
	tests := []struct {
		name  string
		spent map[string]int64
		id    string
		want  string // the key whose limit is reached, "" for none
	}{
		{"nothing spent", nil, "g1", ""},
		{"own limit", map[string]int64{"c1": 50 * micro}, "c1", "c1"},
		{"a child's spending counts against its parent", map[string]int64{"g1": 50 * micro}, "c1", "c1"},
		{"and against the grandparent's limit", map[string]int64{"g1": 50 * micro, "c2": 50 * micro}, "top", "top"},
		{"a sibling's spending binds through the parent", map[string]int64{"c1": 40 * micro, "c2": 60 * micro}, "g1", "top"},
		{"just under", map[string]int64{"c1": 40 * micro, "c2": 60*micro - 1}, "g1", ""},
		{"a key without a limit under a limited one", map[string]int64{"top": 100 * micro}, "c2", "top"},
		{"a separate key is not bound", map[string]int64{"top": 1000 * micro}, "other", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, over := tree.OverLimit(tt.id, tt.spent)
			if got := map[bool]string{true: k.ID}[over]; got != tt.want {
				t.Errorf("OverLimit(%s): got %q, want %q", tt.id, got, tt.want)
			}
		})
	}
}

func TestDeleteKeyRemovesDescendants(t *testing.T) {
	eachStore(t, testDeleteKeyRemovesDescendants)
}

func testDeleteKeyRemovesDescendants(t *testing.T, b Store) {
	ctx := t.Context()
	for _, k := range family() {
		if err := b.PutKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.DeleteKey(ctx, "c1"); err != nil {
		t.Fatalf("DeleteKey: %v", err)
	}
	live, _ := b.ListKeys(ctx, "a")
	if got, want := ids(live), []string{"top", "c2", "other"}; !slices.Equal(got, want) {
		t.Errorf("live keys: got %v, want %v", got, want)
	}
	for _, secret := range []string{"c1", "g1"} {
		if _, err := b.KeyByHash(ctx, hashOf(secret)); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("secret of removed %s: got %v, want not_found", secret, err)
		}
	}
	all, _ := b.ListAllKeys(ctx, "a")
	if got, want := ids(all), []string{"top", "c1", "c2", "g1", "other"}; !slices.Equal(got, want) {
		t.Errorf("all keys: got %v, want %v", got, want)
	}
	for _, k := range all {
		removed := k.ID == "c1" || k.ID == "g1"
		if (k.RemovedAt != nil) != removed || removed && k.Hash != nil {
			t.Errorf("key %s: removed_at %v hash %x, want removed %v and no hash when removed", k.ID, k.RemovedAt, k.Hash, removed)
		}
	}
	// A removed key's family still links, so its spending still counts.
	if k, over := NewKeyTree(all).OverLimit("g1", map[string]int64{"g1": 50_000}); !over || k.ID != "c1" {
		t.Errorf("a removed key's spending: got %v %v, want c1's limit reached", k.ID, over)
	}
	if err := b.DeleteKey(ctx, "c1"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("deleting a removed key: got %v, want not_found", err)
	}
	if err := b.DeleteKey(ctx, "top"); err != nil {
		t.Fatal(err)
	}
	live, _ = b.ListKeys(ctx, "a")
	if got, want := ids(live), []string{"other"}; !slices.Equal(got, want) {
		t.Errorf("live keys after removing top: got %v, want %v", got, want)
	}
}

// TestKeyWithoutParentField reads a key as stores before parents kept it.
func TestKeyWithoutParentField(t *testing.T) {
	b, _ := openTest(t)
	old := `{"id":"k1","account":"a","kind":"full","hash":"` +
		"3q2+7w==" + `","created_at":"2026-03-01T12:00:00Z","daily_limit_micros":7}`
	err := b.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketKeys).Put([]byte("k1"), []byte(old))
	})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := b.ListAllKeys(t.Context(), "a")
	if err != nil || len(keys) != 1 {
		t.Fatalf("ListAllKeys: got %v %v, want the old key", keys, err)
	}
	want := Key{ID: "k1", Account: "a", Kind: KeyFull, Hash: []byte{0xde, 0xad, 0xbe, 0xef},
		CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), DailyLimitMicros: 7}
	if !reflect.DeepEqual(keys[0], want) {
		t.Errorf("got %+v, want %+v", keys[0], want)
	}
	if chain := NewKeyTree(keys).Chain("k1"); len(chain) != 1 {
		t.Errorf("an old key's chain: got %v, want itself alone", ids(chain))
	}
}
