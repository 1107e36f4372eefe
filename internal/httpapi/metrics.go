package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// sandboxMetrics is GET /v1/sandboxes/{id}/metrics: the samples taken
// every sandbox.MetricsInterval while the sandbox runs, from start to end
// (each RFC 3339 or Unix seconds, as E2B sends them; absent: open).
func (s *server) sandboxMetrics(w http.ResponseWriter, r *http.Request, c caller) error {
	ms, ok := s.cfg.Sandboxes.(service.Metrics)
	if !ok {
		return sandbox.Errorf(sandbox.KindNotSupported, "this server keeps no per-sandbox metrics")
	}
	q := r.URL.Query()
	start, err := timeParam(q.Get("start"), "start")
	if err != nil {
		return err
	}
	end, err := timeParam(q.Get("end"), "end")
	if err != nil {
		return err
	}
	if !start.IsZero() && !end.IsZero() && end.Before(start) {
		return sandbox.Errorf(sandbox.KindInvalid, "end is before start")
	}
	out, err := ms.Metrics(r.Context(), c.account, r.PathValue("id"), start, end)
	if err != nil {
		return err
	}
	v := api.SandboxMetrics{Metrics: make([]api.SandboxMetric, 0, len(out))}
	for _, m := range out {
		v.Metrics = append(v.Metrics, api.SandboxMetric{
			Timestamp: m.Timestamp, CPUCount: m.CPUCount, CPUUsedPct: m.CPUUsedPct,
			MemUsed: m.MemUsed, MemTotal: m.MemTotal, DiskUsed: m.DiskUsed, DiskTotal: m.DiskTotal,
			NetRx: m.NetRx, NetTx: m.NetTx, CostMicros: billing.Micros(m.CostNanos),
		})
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// timeParam reads a time given as RFC 3339 or Unix seconds ("" is zero).
func timeParam(v, name string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 && n < 1<<40 {
		return time.Unix(n, 0), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, sandbox.Errorf(sandbox.KindInvalid, "%s must be RFC 3339 or Unix seconds, not %q", name, v)
	}
	return t, nil
}
