package accounts

import (
	"context"
	"math"
	"time"

	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// maxAccountName bounds account names, which are also their ids.
const maxAccountName = 64

// AccountRequest is an account as the admin asks for it.
type AccountRequest struct {
	Name        string
	Concurrency int
	TrialHours  float64
}

// CreateAccount makes an account whose id is its name. Concurrency 0 is
// stored as 0, so the account follows the server's default even when that
// changes; a trial account's is the trial's concurrency.
func (s *Service) CreateAccount(ctx context.Context, req AccountRequest) (store.Account, error) {
	if err := checkAccountName(req.Name); err != nil {
		return store.Account{}, err
	}
	if req.Concurrency < 0 || req.Concurrency > MaxAccountConcurrency {
		return store.Account{}, sandbox.Errorf(sandbox.KindInvalid, "concurrency must be 1 to %d (0 or absent: the server's default, %d)", MaxAccountConcurrency, s.cfg.DefaultConcurrency)
	}
	trial, err := trialSeconds(req.TrialHours)
	if err != nil {
		return store.Account{}, err
	}
	if trial > 0 && req.Concurrency == 0 {
		// A trial account runs what every trial runs unless the admin
		// says otherwise.
		req.Concurrency = s.cfg.Trial.Concurrency
	}
	a := store.Account{
		ID:           req.Name,
		Name:         req.Name,
		CreatedAt:    time.Now().UTC(),
		Concurrency:  req.Concurrency,
		TrialSeconds: trial,
	}
	// The store takes the name in one step: of two API servers creating
	// it at once, one gets a conflict.
	if err := s.cfg.Store.CreateAccount(ctx, a); err != nil {
		return store.Account{}, err
	}
	return a, nil
}

// ListAccounts returns every account, oldest first, with the trial time
// each trial account among them used (TrialUsedMs).
func (s *Service) ListAccounts(ctx context.Context) ([]store.Account, map[string]int64, error) {
	accounts, err := s.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return nil, nil, err
	}
	used, err := s.TrialUsedMs(ctx, accounts)
	if err != nil {
		return nil, nil, err
	}
	return accounts, used, nil
}

// TrialUsedMs sums the trial time each trial account among accounts used,
// counted by size (billing.TrialMs), in one pass over the ledger.
func (s *Service) TrialUsedMs(ctx context.Context, accounts []store.Account) (map[string]int64, error) {
	used := map[string]int64{}
	trials := 0
	for _, a := range accounts {
		if a.TrialSeconds > 0 {
			used[a.ID] = 0
			trials++
		}
	}
	if trials == 0 {
		return used, nil
	}
	var f store.UsageFilter
	if trials == 1 {
		for id := range used {
			f.Account = id
		}
	}
	rows, err := s.cfg.Store.Usage(ctx, f)
	if err != nil {
		return nil, err
	}
	for _, row := range rows {
		if _, ok := used[row.Account]; ok {
			used[row.Account] += billing.TrialMs(row.MemoryMiBMs, row.CPUNs)
		}
	}
	return used, nil
}

// checkAccountName accepts 1 to 64 letters, digits, '-' and '_': names are
// ids, which appear in paths, logs and the CLI's output.
func checkAccountName(name string) error {
	if name == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "name is required")
	}
	if len(name) > maxAccountName {
		return sandbox.Errorf(sandbox.KindInvalid, "name must be at most %d characters", maxAccountName)
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return sandbox.Errorf(sandbox.KindInvalid, "name %q: use only letters, digits, '-' and '_'", name)
		}
	}
	return nil
}

// trialSeconds turns trial hours into whole seconds, rounded up so that a
// tiny grant still makes a trial account.
func trialSeconds(hours float64) (int64, error) {
	if !(hours >= 0 && hours <= maxTrialHours) {
		return 0, sandbox.Errorf(sandbox.KindInvalid, "trial_hours must be 0 to %d", maxTrialHours)
	}
	return int64(math.Ceil(hours * 3600)), nil
}

// TargetAccount is the account a request names in a body or query field:
// the caller's own when it names none. The admin key may name any account
// (one that exists when mustExist). Other keys naming another account are
// refused with one answer, whether it exists or not: the API is no oracle
// of account names.
func (s *Service) TargetAccount(ctx context.Context, c Caller, name string, mustExist bool) (string, error) {
	if name == "" || name == c.Account {
		return c.Account, nil
	}
	if c.Kind != store.KeyAdmin {
		return "", sandbox.Errorf(sandbox.KindForbidden, "only the admin key can act for another account")
	}
	if !mustExist {
		return name, nil
	}
	_, err := s.cfg.Store.GetAccount(ctx, name)
	switch {
	case sandbox.KindOf(err) == sandbox.KindNotFound:
		return "", sandbox.Errorf(sandbox.KindNotFound, "account %s not found", name)
	case err != nil:
		return "", err
	}
	return name, nil
}
