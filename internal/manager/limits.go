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

// spent sums the ledger for f.
func (m *Manager) spent(ctx context.Context, f store.UsageFilter) (cost, aliveMs int64, err error) {
	rows, err := m.cfg.Store.Usage(ctx, f)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range rows {
		cost += r.CostNanos
		aliveMs += r.AliveMs
	}
	return cost, aliveMs, nil
}

// key finds a key of the account by id (nil when there is none: the
// embedded default and tests create without one).
func (m *Manager) key(ctx context.Context, account, keyID string) (*store.Key, error) {
	if keyID == "" {
		return nil, nil
	}
	keys, err := m.cfg.Store.ListKeys(ctx, account)
	if err != nil {
		return nil, err
	}
	for i := range keys {
		if keys[i].ID == keyID {
			return &keys[i], nil
		}
	}
	return nil, nil
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

// overKeyLimit reports whether the key has reached its daily limit.
func (m *Manager) overKeyLimit(ctx context.Context, k *store.Key, now time.Time) (bool, error) {
	if k == nil || k.DailyLimitMicros <= 0 {
		return false, nil
	}
	cost, _, err := m.spent(ctx, store.UsageFilter{KeyID: k.ID, From: day(now), To: day(now)})
	return cost >= k.DailyLimitMicros*1000, err
}

// overTrial reports whether a trial account has used its hours.
func (m *Manager) overTrial(ctx context.Context, a store.Account) (bool, error) {
	if a.TrialSeconds <= 0 {
		return false, nil
	}
	_, alive, err := m.spent(ctx, store.UsageFilter{Account: a.ID})
	return alive >= a.TrialSeconds*1000, err
}

// checkMoney refuses a lease (a create, or a resume of a sandbox that cost
// spentNanos already) that max_cost_micros, the key's daily limit or the
// account's trial does not allow. Nothing is created or charged when it
// refuses. It returns the account with its concurrency resolved.
func (m *Manager) checkMoney(ctx context.Context, account, keyID string, spec sandbox.Spec, spentNanos int64) (store.Account, error) {
	if err := m.checkMaxCost(spec, spentNanos, spec.Timeout); err != nil {
		return store.Account{}, err
	}
	k, err := m.key(ctx, account, keyID)
	if err != nil {
		return store.Account{}, err
	}
	if over, err := m.overKeyLimit(ctx, k, m.now()); err != nil {
		return store.Account{}, err
	} else if over {
		return store.Account{}, sandbox.Errorf(sandbox.KindSpendingLimit,
			"this key's daily spending limit of %d micros is reached for today (UTC)", k.DailyLimitMicros)
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
// limit and of every trial past its hours, with end reason
// spending_limit: a user who set a hard limit expects it to hold.
func (m *Manager) enforceLimits(ctx context.Context, recs []*sandbox.Record) {
	now := m.now()
	keyOver := map[string]bool{}
	trialOver := map[string]bool{}
	for _, r := range recs {
		if r.State != sandbox.StateRunning {
			continue
		}
		over, checked := keyOver[r.KeyID]
		if !checked {
			k, err := m.key(ctx, r.Account, r.KeyID)
			if err == nil {
				over, _ = m.overKeyLimit(ctx, k, now)
			}
			keyOver[r.KeyID] = over
		}
		reason := ""
		if over {
			reason = "the key's daily spending limit was reached"
		} else {
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
			e := m.lock(r.ID)
			if rec, err := m.cfg.Store.GetSandbox(ctx, r.ID); err == nil && rec.State == sandbox.StateRunning {
				m.finish(ctx, e, sandbox.EndSpendingLimit, reason)
			}
			e.mu.Unlock()
		}
	}
}
