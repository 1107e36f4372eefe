package httpapi

import (
	"net/http"
	"net/url"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/accounts"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// createAccount makes an account whose id is its name, under the rules of
// accounts.Service.CreateAccount.
func (s *server) createAccount(w http.ResponseWriter, r *http.Request, c caller) error {
	var req api.CreateAccountRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		return err
	}
	a, err := s.accounts.CreateAccount(r.Context(), accounts.AccountRequest{Name: req.Name, Concurrency: req.Concurrency, TrialHours: req.TrialHours})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.accountView(a, 0))
	return nil
}

func (s *server) listAccounts(w http.ResponseWriter, r *http.Request, c caller) error {
	if err := checkParams(r.URL.Query()); err != nil {
		return err
	}
	all, used, err := s.accounts.ListAccounts(r.Context())
	if err != nil {
		return err
	}
	out := api.AccountList{Accounts: make([]api.Account, 0, len(all))}
	for _, a := range all {
		out.Accounts = append(out.Accounts, s.accountView(a, used[a.ID]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
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
