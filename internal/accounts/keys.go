package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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
// within the caller's, as keys (the caller's account's) say. CreateKey
// checks it again over the keys of the transaction that stores k, so the
// caller's key cannot be removed before k is stored.
func bindToMaker(c Caller, keys []store.Key, k *store.Key, requested int64) error {
	tree := store.NewKeyTree(keys)
	if _, ok := tree.Key(c.KeyID); !ok {
		// Removed since the request was authenticated.
		return sandbox.Errorf(sandbox.KindUnauthorized, "unknown API key")
	}
	k.Parent = c.KeyID
	limit := tree.DailyLimit(c.KeyID)
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
func mayRemove(c Caller, tree *store.KeyTree, target string) error {
	if c.Kind == store.KeyAdmin || target == c.KeyID {
		return nil
	}
	self, ok := tree.Key(c.KeyID)
	if !ok || self.Parent == "" || tree.IsDescendant(target, c.KeyID) {
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
func (s *Service) keyBoundsOf(ctx context.Context, account string) (keyBounds, error) {
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

// maxKeyName bounds the free-text name of a key.
const maxKeyName = 100

// KeyRequest is a key as a caller asks for it: Kind "" is a full key,
// Account "" the caller's, Format "" withruntime's (KeyFormatWithruntime).
type KeyRequest struct {
	Account, Kind, Name, Format string
	DailyLimitMicros            int64
}

// The formats of a key's secret. A secret's format is only how it is
// written: the key's kind, account, limits and parent are its record's,
// found by the secret's hash whatever its format.
const (
	// KeyFormatWithruntime is "wr_" and 43 base64url characters.
	KeyFormatWithruntime = "withruntime"
	// KeyFormatE2B is "e2b_" and 64 lowercase hex digits, the shape E2B's
	// keys have ("e2b_" then hex digits), which E2B's SDKs that check a
	// key's format before sending it accept. It carries as many random
	// bits (256) as a withruntime key.
	KeyFormatE2B = "e2b"
)

// CreateKey makes and stores a key for c as req asks, and returns its
// secret (which is kept nowhere) with it. A refusal past the day's keys
// says, in retryAfter, how long until the oldest of the day's passes.
func (s *Service) CreateKey(ctx context.Context, c Caller, req KeyRequest) (secret string, k store.Key, retryAfter time.Duration, err error) {
	kind := store.KeyKind(req.Kind)
	switch kind {
	case "":
		kind = store.KeyFull
	case store.KeyFull, store.KeyReadOnly:
	case store.KeyAdmin:
		if c.Kind != store.KeyAdmin {
			return "", k, 0, sandbox.Errorf(sandbox.KindForbidden, "only the admin key can create admin keys")
		}
	default:
		return "", k, 0, sandbox.Errorf(sandbox.KindInvalid, `kind must be "full" or "read_only", not %q`, req.Kind)
	}
	if req.DailyLimitMicros < 0 {
		return "", k, 0, sandbox.Errorf(sandbox.KindInvalid, "daily_limit_micros must not be negative (0: no limit)")
	}
	if len(req.Name) > maxKeyName {
		return "", k, 0, sandbox.Errorf(sandbox.KindInvalid, "name must be at most %d bytes", maxKeyName)
	}
	switch req.Format {
	case "", KeyFormatWithruntime, KeyFormatE2B:
	default:
		return "", k, 0, sandbox.Errorf(sandbox.KindInvalid, `format must be %q or %q, not %q`, KeyFormatWithruntime, KeyFormatE2B, req.Format)
	}
	account, err := s.TargetAccount(ctx, c, req.Account, true)
	if err != nil {
		return "", k, 0, err
	}
	secret, k = NewKeyFormat(account, kind, req.Format)
	k.Name = req.Name
	k.DailyLimitMicros = req.DailyLimitMicros
	if c.Kind == store.KeyAdmin {
		err = s.cfg.Store.PutKey(ctx, k)
	} else {
		retryAfter, err = s.putBoundKey(ctx, c, &k, req.DailyLimitMicros)
	}
	if err != nil {
		return "", store.Key{}, retryAfter, err
	}
	return secret, k, 0, nil
}

// putBoundKey stores k, made by the non-admin caller, bound to the caller's
// key (bindToMaker) and within the account's bounds on keys (keyBounds).
// The binding and the bounds on the keys the account holds are checked
// again in the store's transaction that inserts k: another API server
// removing the caller's key, or making keys, meanwhile refuses the insert.
func (s *Service) putBoundKey(ctx context.Context, c Caller, k *store.Key, requested int64) (time.Duration, error) {
	b, err := s.keyBoundsOf(ctx, c.Account)
	if err != nil {
		return 0, err
	}
	all, err := s.cfg.Store.ListAllKeys(ctx, c.Account)
	if err != nil {
		return 0, err
	}
	if wait, err := b.made(all, time.Now()); err != nil {
		return wait, err
	}
	keys, err := s.cfg.Store.ListKeys(ctx, c.Account)
	if err != nil {
		return 0, err
	}
	if err := bindToMaker(c, keys, k, requested); err != nil {
		return 0, err
	}
	return 0, s.cfg.Store.PutKeyIf(ctx, *k, func(keys []store.Key) error {
		if err := b.held(c.Account, keys); err != nil {
			return err
		}
		again := *k
		if err := bindToMaker(c, keys, &again, requested); err != nil {
			return err
		}
		if again.Parent != k.Parent || again.DailyLimitMicros != k.DailyLimitMicros {
			return sandbox.Errorf(sandbox.KindConflict, "the keys of account %s changed meanwhile: try again", c.Account)
		}
		return nil
	})
}

// ListKeys returns the keys of account as c may see them: the caller's
// own account's when it names none, every key when the admin key names
// none (TargetAccount).
func (s *Service) ListKeys(ctx context.Context, c Caller, account string) ([]store.Key, error) {
	if c.Kind != store.KeyAdmin || account != "" {
		var err error
		if account, err = s.TargetAccount(ctx, c, account, false); err != nil {
			return nil, err
		}
	}
	return s.cfg.Store.ListKeys(ctx, account)
}

// DeleteKey removes a key of the caller's account (any key, for the admin
// key), and with it every key made through it. Only the admin key removes
// admin keys, and never the last one: the operator would be locked out of
// managing accounts. A key made by another key removes only itself and
// the keys made through it (mayRemove).
func (s *Service) DeleteKey(ctx context.Context, c Caller, id string) error {
	account := c.Account
	if c.Kind == store.KeyAdmin {
		account = ""
	}
	// The rules are checked over the keys read in the transaction that
	// removes the key: two API servers removing the last two admin keys at
	// once cannot both succeed.
	return s.cfg.Store.DeleteKeyIf(ctx, id, account, func(keys []store.Key) error {
		return mayDelete(c, keys, id)
	})
}

// mayDelete refuses what DeleteKey must not do to key id, over keys (the
// caller's account's, or every key for the admin key).
func mayDelete(c Caller, keys []store.Key, id string) error {
	var target *store.Key
	admins := 0
	for i, k := range keys {
		if k.ID == id {
			target = &keys[i]
		}
		if k.Kind == store.KeyAdmin {
			admins++
		}
	}
	switch {
	case target == nil:
		return sandbox.Errorf(sandbox.KindNotFound, "key %s not found", id)
	case target.Kind == store.KeyAdmin && c.Kind != store.KeyAdmin:
		return sandbox.Errorf(sandbox.KindForbidden, "only the admin key can remove an admin key")
	case target.Kind == store.KeyAdmin && admins == 1:
		return sandbox.Errorf(sandbox.KindConflict, "key %s is the last admin key: create another before removing it", id)
	}
	return mayRemove(c, store.NewKeyTree(keys), id)
}

// NewKey makes a key of account with a fresh secret in withruntime's
// format, which it returns: the key keeps only the secret's SHA-256.
func NewKey(account string, kind store.KeyKind) (string, store.Key) {
	return NewKeyFormat(account, kind, KeyFormatWithruntime)
}

// NewKeyFormat is NewKey with a secret in format (a KeyFormat; "" is
// withruntime's).
func NewKeyFormat(account string, kind store.KeyKind, format string) (string, store.Key) {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	secret := "wr_" + base64.RawURLEncoding.EncodeToString(b[:])
	if format == KeyFormatE2B {
		secret = "e2b_" + hex.EncodeToString(b[:])
	}
	sum := sha256.Sum256([]byte(secret))
	return secret, store.Key{
		ID:        "key_" + randHex(12),
		Account:   account,
		Kind:      kind,
		Hash:      sum[:],
		CreatedAt: time.Now().UTC(),
	}
}
