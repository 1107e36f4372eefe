package client

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// SandboxMetrics sends the bounds it was given (none when zero) with the
// key, and returns the samples as they came; an unknown sandbox is
// ErrNotFound.
func TestSandboxMetrics(t *testing.T) {
	var queries []string
	t0 := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}/metrics", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			writeError(w, 401, "unauthenticated", "no key")
			return
		}
		if r.PathValue("id") != "sbx_a" {
			writeError(w, 404, "not_found", "no sandbox "+r.PathValue("id"))
			return
		}
		queries = append(queries, r.URL.RawQuery)
		if r.URL.Query().Get("start") != "" {
			writeJSON(w, 200, map[string]any{"metrics": []any{}})
			return
		}
		writeJSON(w, 200, api.SandboxMetrics{Metrics: []api.SandboxMetric{
			{Timestamp: t0, CPUCount: 2, CPUUsedPct: 97.5, MemUsed: 300 << 20, MemTotal: 1 << 30, DiskUsed: 64 << 20, DiskTotal: 10 << 30, NetRx: 10, NetTx: 20},
			{Timestamp: t0.Add(5 * time.Second), CPUCount: 2, CPUUsedPct: 1},
		}})
	})
	c := newTestClient(t, mux)

	ms, err := c.SandboxMetrics(t.Context(), "sbx_a", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || !ms[0].Timestamp.Equal(t0) || ms[0].CPUUsedPct != 97.5 || ms[0].MemUsed != 300<<20 || ms[0].NetTx != 20 || ms[1].CPUUsedPct != 1 {
		t.Errorf("samples %+v", ms)
	}
	ms, err = c.SandboxMetrics(t.Context(), "sbx_a", t0, t0.Add(90*time.Second+time.Millisecond))
	if err != nil || ms == nil || len(ms) != 0 {
		t.Errorf("bounded: %v %v, want an empty list", ms, err)
	}
	want := []string{"", "end=2026-12-04T21%3A01%3A30.001Z&start=2026-12-04T21%3A00%3A00Z"}
	if len(queries) != 2 || queries[0] != want[0] || queries[1] != want[1] {
		t.Errorf("queries %q, want %q", queries, want)
	}
	if _, err := c.SandboxMetrics(t.Context(), "sbx_zz", time.Time{}, time.Time{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown sandbox: %v, want ErrNotFound", err)
	}
	if _, err := c.SandboxMetrics(t.Context(), "", time.Time{}, time.Time{}); err == nil {
		t.Error("an empty id was sent")
	}
}
