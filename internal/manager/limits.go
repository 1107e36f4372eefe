package manager

import (
	"context"
	"time"

	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// checkMaxCost refuses a lease of d that could cost more than the spec's
// cap at full CPU, on top of what the sandbox has cost already.
func (m *Manager) checkMaxCost(spec sandbox.Spec, spentNanos int64, d time.Duration) error {
	if spec.MaxCostMicros == nil {
		return nil
	}
	worst := spentNanos + m.cfg.Prices.MaxLease(spec.VCPUs, spec.MemoryMiB, d)
	if worst > *spec.MaxCostMicros*1000 {
		return sandbox.Errorf(sandbox.KindMaxCost,
			"a lease of %s at %d vCPU and %d MiB could cost %d micros at full CPU (with %d spent), more than max_cost_micros %d",
			d, spec.VCPUs, spec.MemoryMiB, billing.Micros(worst), billing.Micros(spentNanos), *spec.MaxCostMicros)
	}
	return nil
}

// trialUsedMs sums the trial time the account's ledger rows used, in
// milliseconds of the default sandbox (billing.TrialMs).
func (m *Manager) trialUsedMs(ctx context.Context, account string) (int64, error) {
	rows, err := m.cfg.Store.Usage(ctx, store.UsageFilter{Account: account})
	if err != nil {
		return 0, err
	}
	var used int64
	for _, r := range rows {
		used += billing.TrialMs(r.MemoryMiBMs, r.CPUNs)
	}
	return used, nil
}

// keyLimits is what the daily limits of one account's keys need: its keys,
// removed ones included, linked by parent, and what each spent today. A
// key's limit binds its sandboxes and those of every key made through it,
// so a key cannot mint its way past a limit (internal/accounts keys.go).
type keyLimits struct {
	tree  *store.KeyTree
	spent map[string]int64 // cost in nanos, by key id
}

// limitsOf reads the account's keys and, when keyID is "" or a key on
// whose chain there is a limit, what they spent on now's UTC day.
func (m *Manager) limitsOf(ctx context.Context, account, keyID string, now time.Time) (*keyLimits, error) {
	keys, err := m.cfg.Store.ListAllKeys(ctx, account)
	if err != nil {
		return nil, err
	}
	l := &keyLimits{tree: store.NewKeyTree(keys), spent: map[string]int64{}}
	if keyID != "" && l.tree.DailyLimit(keyID) == 0 || keyID == "" && !anyLimit(keys) {
		return l, nil
	}
	rows, err := m.cfg.Store.Usage(ctx, store.UsageFilter{Account: account, From: day(now), To: day(now)})
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		l.spent[r.KeyID] += r.CostNanos
	}
	return l, nil
}

// anyLimit reports whether one of keys has a daily limit.
func anyLimit(keys []store.Key) bool {
	for _, k := range keys {
		if k.DailyLimitMicros > 0 {
			return true
		}
	}
	return false
}

// over returns the key on keyID's chain (itself, then the keys it was made
// through) whose family has spent its daily limit, if there is one.
func (l *keyLimits) over(keyID string) (store.Key, bool) {
	return l.tree.OverLimit(keyID, l.spent)
}

// limitReached is the refusal of a lease by keyID because of over's limit.
func limitReached(keyID string, over store.Key) error {
	if over.ID == keyID {
		return sandbox.Errorf(sandbox.KindSpendingLimit,
			"this key's daily spending limit of %d micros is reached for today (UTC)", over.DailyLimitMicros)
	}
	return sandbox.Errorf(sandbox.KindSpendingLimit,
		"the daily spending limit of %d micros of key %s, which this key was made through, is reached for today (UTC)", over.DailyLimitMicros, over.ID)
}

// account returns the account's settings (zero values for an account the
// store does not know).
func (m *Manager) account(ctx context.Context, id string) (store.Account, error) {
	a, err := m.cfg.Store.GetAccount(ctx, id)
	if err != nil {
		if sandbox.KindOf(err) == sandbox.KindNotFound {
			return store.Account{ID: id}, nil
		}
		return store.Account{}, err
	}
	return *a, nil
}

// overTrial reports whether a trial account has used its hours, counted
// by size (billing.TrialMs).
func (m *Manager) overTrial(ctx context.Context, a store.Account) (bool, error) {
	if a.TrialSeconds <= 0 {
		return false, nil
	}
	used, err := m.trialUsedMs(ctx, a.ID)
	return used >= a.TrialSeconds*1000, err
}

// checkMoney refuses a lease (a create, or a resume of a sandbox that cost
// spentNanos already) that max_cost_micros, the key's daily limit or the
// account's trial does not allow. Nothing is created or charged when it
// refuses. It returns the account with its concurrency resolved.
func (m *Manager) checkMoney(ctx context.Context, account, keyID string, spec sandbox.Spec, spentNanos int64) (store.Account, error) {
	if err := m.checkMaxCost(spec, spentNanos, spec.Timeout); err != nil {
		return store.Account{}, err
	}
	if keyID != "" {
		l, err := m.limitsOf(ctx, account, keyID, m.now())
		if err != nil {
			return store.Account{}, err
		}
		if over, ok := l.over(keyID); ok {
			return store.Account{}, limitReached(keyID, over)
		}
	}
	a, err := m.account(ctx, account)
	if err != nil {
		return a, err
	}
	if over, err := m.overTrial(ctx, a); err != nil {
		return a, err
	} else if over {
		return a, sandbox.Errorf(sandbox.KindTrialExhausted, "this trial's %.1f free sandbox hours are used up", float64(a.TrialSeconds)/3600)
	}
	if a.Concurrency == 0 {
		a.Concurrency = m.cfg.DefaultConcurrency
	}
	return a, nil
}

// enforceLimits ends the running sandboxes of every key past its daily
// limit, or past the limit of a key it was made through, and of every
// trial past its hours, with end reason spending_limit: a user who set a
// hard limit expects it to hold.
func (m *Manager) enforceLimits(ctx context.Context, recs []*sandbox.Record) {
	now := m.now()
	limits := map[string]*keyLimits{} // by account; nil when unreadable
	keyOver := map[string]string{}    // by key id: the reason, "" for none
	trialOver := map[string]bool{}
	for _, r := range recs {
		if r.State != sandbox.StateRunning {
			continue
		}
		reason, checked := keyOver[r.KeyID]
		if !checked && r.KeyID != "" {
			l, read := limits[r.Account]
			if !read {
				l, _ = m.limitsOf(ctx, r.Account, "", now)
				limits[r.Account] = l
			}
			if l != nil {
				if over, ok := l.over(r.KeyID); ok && over.ID == r.KeyID {
					reason = "the key's daily spending limit was reached"
				} else if ok {
					reason = "the daily spending limit of key " + over.ID + ", which the sandbox's key was made through, was reached"
				}
			}
			keyOver[r.KeyID] = reason
		}
		if reason == "" {
			tover, checked := trialOver[r.Account]
			if !checked {
				if a, err := m.account(ctx, r.Account); err == nil {
					tover, _ = m.overTrial(ctx, a)
				}
				trialOver[r.Account] = tover
			}
			if tover {
				reason = "the trial's free sandbox hours are used up"
			}
		}
		if reason != "" {
			m.runLockedOrLater(r.ID, func(e *entry) {
				if rec, err := m.cfg.Store.GetSandbox(ctx, e.id); err == nil && rec.State == sandbox.StateRunning && m.ownsRecord(rec) {
					m.finish(ctx, e, sandbox.EndSpendingLimit, reason)
				}
			})
		}
	}
}
