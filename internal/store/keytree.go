package store

import (
	"cmp"
	"slices"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// KeyTree is the keys of one account linked by Key.Parent, so that a key's
// ancestors (the keys it was made through) and its descendants (the keys
// made through it) can be walked. Limits hold down the tree: a key spends
// within the limit of every ancestor, and what its descendants spend counts
// against it.
type KeyTree struct {
	keys     map[string]Key
	children map[string][]string
}

// NewKeyTree links keys. A parent that is not among keys ends the chain.
func NewKeyTree(keys []Key) *KeyTree {
	t := &KeyTree{keys: make(map[string]Key, len(keys)), children: map[string][]string{}}
	for _, k := range keys {
		t.keys[k.ID] = k
	}
	for _, k := range keys {
		if k.Parent != "" && k.Parent != k.ID {
			t.children[k.Parent] = append(t.children[k.Parent], k.ID)
		}
	}
	return t
}

// Key returns the key with id.
func (t *KeyTree) Key(id string) (Key, bool) {
	k, ok := t.keys[id]
	return k, ok
}

// Chain returns the key with id and then its ancestors, nearest first
// (nothing when id is unknown). A cycle, which the API cannot make, ends
// the chain instead of looping.
func (t *KeyTree) Chain(id string) []Key {
	var out []Key
	seen := map[string]bool{}
	for id != "" && !seen[id] {
		k, ok := t.keys[id]
		if !ok {
			break
		}
		seen[id] = true
		out = append(out, k)
		id = k.Parent
	}
	return out
}

// Subtree returns id and the ids of every key made through it.
func (t *KeyTree) Subtree(id string) []string {
	out := []string{id}
	seen := map[string]bool{id: true}
	for i := 0; i < len(out); i++ {
		for _, c := range t.children[out[i]] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// IsDescendant reports whether the key with id was made through ancestor
// (a key is not its own descendant).
func (t *KeyTree) IsDescendant(id, ancestor string) bool {
	chain := t.Chain(id)
	for i := 1; i < len(chain); i++ {
		if chain[i].ID == ancestor {
			return true
		}
	}
	return false
}

// DailyLimit is the most the key with id may let sandboxes cost in a UTC
// day: the lowest limit on its chain, in micros (0: no limit anywhere).
func (t *KeyTree) DailyLimit(id string) int64 {
	var limit int64
	for _, k := range t.Chain(id) {
		if k.DailyLimitMicros > 0 && (limit == 0 || k.DailyLimitMicros < limit) {
			limit = k.DailyLimitMicros
		}
	}
	return limit
}

// OverLimit returns the first key on id's chain whose subtree has spent
// its daily limit or more, given what each key spent (cost in nanos, by key
// id), and whether there is one.
func (t *KeyTree) OverLimit(id string, spentNanos map[string]int64) (Key, bool) {
	for _, k := range t.Chain(id) {
		if k.DailyLimitMicros <= 0 {
			continue
		}
		var sum int64
		for _, d := range t.Subtree(k.ID) {
			sum += spentNanos[d]
		}
		if sum >= k.DailyLimitMicros*1000 {
			return k, true
		}
	}
	return Key{}, false
}

// sortRecords orders sandbox records as every store lists them: oldest
// first, then by id.
func sortRecords(recs []*sandbox.Record) {
	slices.SortStableFunc(recs, func(x, y *sandbox.Record) int {
		if c := x.CreatedAt.Compare(y.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
}

// sortKeys orders keys as every store lists them: oldest first, then by id.
func sortKeys(keys []Key) {
	slices.SortStableFunc(keys, func(x, y Key) int {
		if c := x.CreatedAt.Compare(y.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
}
