package httpapi

import (
	"context"
	"time"

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

// Keys are few. An account holds at most Config.MaxKeysPerAccount keys
// (conflict past it: remove one first), and its keys make at most as many
// in a day, removed ones counted (rate_limited), so that making and
// removing keys in a loop does not grow the store without end: removed
// keys are kept, as what they spent counts. A trial account's keys make
// at most Trial.MaxKeys keys in all (forbidden past it). The admin key is
// bound by none of these.

// keyDay is the window of the daily bound on keys made.
const keyDay = 24 * time.Hour

// keyBounds are the bounds on one account's keys.
type keyBounds struct {
	max   int // keys held, and made in a day
	trial int // keys made by its keys in all; -1: not a trial account
}

// keyBoundsOf is the bounds on account's keys.
func (s *server) keyBoundsOf(ctx context.Context, account string) (keyBounds, error) {
	b := keyBounds{max: s.cfg.MaxKeysPerAccount, trial: -1}
	a, err := s.cfg.Store.GetAccount(ctx, account)
	switch {
	case sandbox.KindOf(err) == sandbox.KindNotFound:
		return b, nil
	case err != nil:
		return b, err
	case a.TrialSeconds > 0:
		b.trial = s.cfg.Trial.MaxKeys
	}
	return b, nil
}

// made refuses one more key made by a key of the account whose keys,
// removed ones included, are all, at now: past the trial's keys, or the
// day's (with how long until the oldest of the day's passes). Checked
// before the store's transaction, over a read of its own: racing calls
// pass it together at most as many times as held lets them.
func (b keyBounds) made(all []store.Key, now time.Time) (time.Duration, error) {
	n, day := 0, 0
	var oldest time.Time
	for _, k := range all {
		if k.Parent == "" {
			continue // the admin key's, or the trial's own
		}
		n++
		if now.Sub(k.CreatedAt) < keyDay {
			day++
			if oldest.IsZero() || k.CreatedAt.Before(oldest) {
				oldest = k.CreatedAt
			}
		}
	}
	if b.trial >= 0 && n >= b.trial {
		return 0, trialKeysSpent(b.trial)
	}
	if day >= b.max {
		return oldest.Add(keyDay).Sub(now), sandbox.Errorf(sandbox.KindRateLimited,
			"this account's keys made %d keys in the last 24 hours, the most they may: try again later", day)
	}
	return 0, nil
}

// held refuses one more key of account, which holds keys: past the keys
// an account holds, or a trial's keys past what they may make. Checked in
// the store's transaction that inserts the key.
func (b keyBounds) held(account string, keys []store.Key) error {
	minted := 0
	for _, k := range keys {
		if k.Parent != "" {
			minted++
		}
	}
	switch {
	case b.trial >= 0 && minted >= b.trial:
		return trialKeysSpent(b.trial)
	case len(keys) >= b.max:
		return sandbox.Errorf(sandbox.KindConflict,
			"account %s holds %d keys, the most an account may: remove one before making another", account, len(keys))
	}
	return nil
}

// trialKeysSpent is the refusal of a key past a trial's n.
func trialKeysSpent(n int) error {
	return sandbox.Errorf(sandbox.KindForbidden, "a trial account's keys make at most %d keys, removed ones counted", n)
}
