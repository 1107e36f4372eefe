package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/accounts"
)

// trial makes a trial account and a full key of it, for anyone, as often
// as the limits allow (accounts.Service.Trial): the client address's and
// the whole server's per window (rate_limited, with Retry-After), and the
// trial hours outstanding (capacity_exhausted).
func (s *server) trial(w http.ResponseWriter, r *http.Request, _ caller) error {
	if err := s.accounts.TrialOffered(); err != nil {
		return err
	}
	var req struct{}
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, true, &req); err != nil {
		return err
	}
	g, wait, err := s.accounts.Trial(r.Context(), accounts.ClientAddr(r.RemoteAddr))
	if err != nil {
		if wait > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		}
		return err
	}
	infoFrom(r.Context()).account = g.Account.ID
	writeJSON(w, http.StatusCreated, api.Trial{Account: g.Account.ID, Key: g.Secret, TrialHours: float64(g.Account.TrialSeconds) / 3600})
	return nil
}
