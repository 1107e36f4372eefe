package e2bcompat

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// getMetrics answers withruntime's samples in E2B's shape, with the
// bounds sent on as withruntime's (end covering its whole second), and
// refuses bad bounds and an ended sandbox as E2B does.
func TestControlMetrics(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 21, 0, 5, 123456789, time.UTC)
	var mu sync.Mutex
	var queries []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		answer, fail := answering(w)
		switch r.PathValue("id") {
		case "sbx_run":
			answer(200, api.Sandbox{ID: "sbx_run", State: "running"})
		case "sbx_end":
			answer(200, api.Sandbox{ID: "sbx_end", State: "ended", EndReason: "stopped"})
		default:
			fail(404, "not_found")
		}
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/metrics", func(w http.ResponseWriter, r *http.Request) {
		answer, fail := answering(w)
		if r.Header.Get("Authorization") != "Bearer wr_good" {
			fail(401, "unauthorized")
			return
		}
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		answer(200, api.SandboxMetrics{Metrics: []api.SandboxMetric{
			{Timestamp: t0, CPUCount: 2, CPUUsedPct: 97.5, MemUsed: 300 << 20, MemTotal: 1 << 30, DiskUsed: 64 << 20, DiskTotal: 10 << 30, NetRx: 5, NetTx: 6},
		}})
	})
	s, err := New(Config{API: mux, Secret: bytes.Repeat([]byte{9}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}

	status, _, body := call(s, "wr_good", "GET", "/sandboxes/sbx_run/metrics", "")
	var got []map[string]any
	if status != 200 || json.Unmarshal(body, &got) != nil || len(got) != 1 {
		t.Fatalf("got %d %s, want 200 with one sample", status, body)
	}
	want := map[string]any{
		"timestamp": "2026-12-04T21:00:05.123456Z", "timestampUnix": float64(t0.Unix()), "cpuCount": float64(2), "cpuUsedPct": 97.5,
		"memUsed": float64(300 << 20), "memTotal": float64(1 << 30), "memCache": float64(0), "diskUsed": float64(64 << 20), "diskTotal": float64(10 << 30),
	}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("%s: got %v, want %v", k, got[0][k], v)
		}
	}
	if len(got[0]) != len(want) {
		t.Errorf("fields %v, want exactly E2B's %v", got[0], want)
	}

	status, _, body = call(s, "wr_good", "GET", "/sandboxes/sbx_run/metrics?start=1796418000&end=1796418060", "")
	if status != 200 {
		t.Errorf("bounded: got %d %s", status, body)
	}
	wantQ := []string{"", "end=2026-12-04T21%3A01%3A00.999999999Z&start=2026-12-04T21%3A00%3A00Z"}
	if strings.Join(queries, "|") != strings.Join(wantQ, "|") {
		t.Errorf("sent queries %q, want %q", queries, wantQ)
	}

	for _, c := range []struct {
		key, path string
		status    int
		want      string
	}{
		{"wr_good", "/sandboxes/sbx_run/metrics?start=yesterday", 400, "start must be Unix seconds"},
		{"wr_good", "/sandboxes/sbx_run/metrics?start=20&end=10", 400, "end is before start"},
		{"wr_good", "/sandboxes/sbx_end/metrics", 404, "ended"},
		{"wr_good", "/sandboxes/nope/metrics", 404, `"code":404`},
		{"", "/sandboxes/sbx_run/metrics", 401, `"code":401`},
	} {
		status, _, body := call(s, c.key, "GET", c.path, "")
		if status != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: got %d %s, want %d with %q", c.path, status, body, c.status, c.want)
		}
	}
	if len(queries) != 2 {
		t.Errorf("refused calls reached the API: %q", queries)
	}
}
