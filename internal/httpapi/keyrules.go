package httpapi

import (
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// Keys never give more than they have. A key that is not the admin key
// makes only full and read-only keys of its own account, and each records
// it as its parent: what the new key's sandboxes spend counts against the
// daily limit of every key it was made through (internal/manager), and its
// own limit is never above the lowest on its chain (a request without one
// inherits it). Removing a key removes the keys made through it, whose
// spending keeps counting. Keys the admin key makes answer to no other key.

// bindToMaker makes k, about to be created by the non-admin caller, answer
// to the caller: its parent is the caller's key and its daily limit is
// within the caller's, as keys (the caller's account's) say. createKey
// checks it again over the keys of the transaction that stores k, so the
// caller's key cannot be removed before k is stored.
func bindToMaker(c caller, keys []store.Key, k *store.Key, requested int64) error {
	tree := store.NewKeyTree(keys)
	if _, ok := tree.Key(c.keyID); !ok {
		// Removed since the request was authenticated.
		return sandbox.Errorf(sandbox.KindUnauthorized, "unknown API key")
	}
	k.Parent = c.keyID
	limit := tree.DailyLimit(c.keyID)
	switch {
	case limit == 0:
		k.DailyLimitMicros = requested
	case requested == 0:
		k.DailyLimitMicros = limit
	case requested > limit:
		return sandbox.Errorf(sandbox.KindForbidden,
			"this key may let sandboxes spend at most %d micros a day: a key it makes cannot have a higher daily_limit_micros (%d)", limit, requested)
	default:
		k.DailyLimitMicros = requested
	}
	return nil
}

// mayRemove refuses the removal of target by a non-admin caller whose key
// was made by another key, unless target is that key or one made through
// it: a key never removes the keys it answers to, nor their other keys.
// Keys the admin key made remove any non-admin key of their account.
func mayRemove(c caller, tree *store.KeyTree, target string) error {
	if c.kind == store.KeyAdmin || target == c.keyID {
		return nil
	}
	self, ok := tree.Key(c.keyID)
	if !ok || self.Parent == "" || tree.IsDescendant(target, c.keyID) {
		return nil
	}
	return sandbox.Errorf(sandbox.KindForbidden, "a key made by another key can remove only itself and the keys made through it")
}
