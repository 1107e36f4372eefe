package httpapi

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// maxAccountName bounds account names, which are also their ids.
const maxAccountName = 64

// createAccount makes an account whose id is its name. Concurrency 0 is
// stored as 0, so the account follows the server's default even when that
// changes; a trial account's is the trial's concurrency.
func (s *server) createAccount(w http.ResponseWriter, r *http.Request, c caller) error {
	var req api.CreateAccountRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		return err
	}
	if err := checkAccountName(req.Name); err != nil {
		return err
	}
	if req.Concurrency < 0 || req.Concurrency > MaxAccountConcurrency {
		return sandbox.Errorf(sandbox.KindInvalid, "concurrency must be 1 to %d (0 or absent: the server's default, %d)", MaxAccountConcurrency, s.cfg.DefaultConcurrency)
	}
	trial, err := trialSeconds(req.TrialHours)
	if err != nil {
		return err
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
	if err := s.cfg.Store.CreateAccount(r.Context(), a); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.accountView(a, 0))
	return nil
}

func (s *server) listAccounts(w http.ResponseWriter, r *http.Request, c caller) error {
	if err := checkParams(r.URL.Query()); err != nil {
		return err
	}
	accounts, err := s.cfg.Store.ListAccounts(r.Context())
	if err != nil {
		return err
	}
	used, err := s.trialUsedMs(r.Context(), accounts)
	if err != nil {
		return err
	}
	out := api.AccountList{Accounts: make([]api.Account, 0, len(accounts))}
	for _, a := range accounts {
		out.Accounts = append(out.Accounts, s.accountView(a, used[a.ID]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// trialUsedMs sums the trial time each trial account among accounts used,
// counted by size (billing.TrialMs), in one pass over the ledger.
func (s *server) trialUsedMs(ctx context.Context, accounts []store.Account) (map[string]int64, error) {
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

// accountView is an account as the API shows it: concurrency resolved to
// the server's default, and for a trial account its hours granted and used.
func (s *server) accountView(a store.Account, usedMs int64) api.Account {
	v := api.Account{ID: a.ID, Name: a.Name, Concurrency: a.Concurrency, CreatedAt: a.CreatedAt}
	if v.Name == "" {
		v.Name = a.ID
	}
	if v.Concurrency == 0 {
		v.Concurrency = s.cfg.DefaultConcurrency
	}
	if a.TrialSeconds > 0 {
		v.TrialHours = float64(a.TrialSeconds) / 3600
		v.TrialUsedHours = float64(usedMs) / 3.6e6
	}
	return v
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

// targetAccount is the account a request names in a body or query field:
// the caller's own when it names none. The admin key may name any account
// (one that exists when mustExist). Other keys naming another account are
// refused with one answer, whether it exists or not: the API is no oracle
// of account names.
func (s *server) targetAccount(ctx context.Context, c caller, name string, mustExist bool) (string, error) {
	if name == "" || name == c.account {
		return c.account, nil
	}
	if c.kind != store.KeyAdmin {
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

// checkParams refuses query parameters other than allowed, and repeated
// ones: a misspelt filter must not silently select everything.
func checkParams(q url.Values, allowed ...string) error {
	for name, vs := range q {
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		if !known {
			return sandbox.Errorf(sandbox.KindInvalid, "unknown query parameter %q", name)
		}
		if len(vs) > 1 {
			return sandbox.Errorf(sandbox.KindInvalid, "query parameter %s is given %d times", name, len(vs))
		}
	}
	return nil
}
