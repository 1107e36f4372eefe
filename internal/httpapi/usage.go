package httpapi

import (
	"net/http"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// usage answers the ledger's rows of the caller's account (the admin key:
// of ?account=, or of every account), per UTC day and key.
func (s *server) usage(w http.ResponseWriter, r *http.Request, c caller) error {
	q := r.URL.Query()
	if err := checkParams(q, "account", "key", "from", "to"); err != nil {
		return err
	}
	f := store.UsageFilter{KeyID: q.Get("key"), From: q.Get("from"), To: q.Get("to")}
	for _, p := range []struct{ name, day string }{{"from", f.From}, {"to", f.To}} {
		if p.day == "" {
			continue
		}
		if _, err := time.Parse(time.DateOnly, p.day); err != nil {
			return sandbox.Errorf(sandbox.KindInvalid, "%s must be a day as YYYY-MM-DD, not %q", p.name, p.day)
		}
	}
	if f.From != "" && f.To != "" && f.From > f.To {
		return sandbox.Errorf(sandbox.KindInvalid, "from (%s) is after to (%s)", f.From, f.To)
	}
	if c.kind != store.KeyAdmin || q.Get("account") != "" {
		var err error
		if f.Account, err = s.accounts.TargetAccount(r.Context(), c.who(), q.Get("account"), false); err != nil {
			return err
		}
	}
	rows, err := s.cfg.Store.Usage(r.Context(), f)
	if err != nil {
		return err
	}
	out := api.Usage{Rows: make([]api.UsageRow, 0, len(rows))}
	var total int64
	for _, row := range rows {
		out.Rows = append(out.Rows, usageView(row))
		total += row.CostNanos
	}
	out.CostMicros = billing.Micros(total)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// usageView is a ledger row in the API's units: hours and USD millionths.
func usageView(row store.UsageRow) api.UsageRow {
	return api.UsageRow{
		Day:            row.Day,
		Account:        row.Account,
		KeyID:          row.KeyID,
		SandboxHours:   float64(row.AliveMs) / 3.6e6,
		CPUHours:       float64(row.CPUNs) / 3.6e12,
		MemoryGiBHours: float64(row.MemoryMiBMs) / 1024 / 3.6e6,
		CostMicros:     billing.Micros(row.CostNanos),
	}
}
