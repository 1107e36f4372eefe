package e2e

import (
	"net"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestPrometheusMetrics: after known activity on a real server (two
// creates, one stop, a refused GET), serve --metrics-listen's scrape,
// read with Prometheus' text parser, counts exactly that.
func TestPrometheusMetrics(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := testenv.StartServer(t, "--metrics-listen", addr)
	c, err := client.New(client.WithBaseURL(s.URL), client.WithAPIKey(s.Key))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		sb, err := c.CreateSandbox(t.Context(), api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, TimeoutSeconds: 120})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
		t.Cleanup(func() { c.StopSandbox(t.Context(), sb.ID) })
	}
	if _, err := c.StopSandbox(t.Context(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if code, _ := call(t, s, s.Key, http.MethodGet, "/v1/sandboxes/sbxnothere", nil); code != 404 {
		t.Fatalf("GET of a missing sandbox: %d", code)
	}

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string, labels ...string) float64 {
		f := fams[name]
		if f == nil {
			return -1
		}
	next:
		for _, m := range f.Metric {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue next
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
		return 0
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"withruntime_api_requests_total", []string{"route", "POST /v1/sandboxes", "code", "201"}, 2},
		{"withruntime_api_requests_total", []string{"route", "GET /v1/sandboxes/{id}", "code", "404"}, 1},
		{"withruntime_sandbox_creates_total", []string{"outcome", "cold"}, 2},
		{"withruntime_sandboxes", []string{"state", "running"}, 1},
		{"withruntime_admission_held", []string{"resource", "vcpus"}, 1},
		{"withruntime_admission_held", []string{"resource", "memory_mib"}, 512},
		{"withruntime_census_up", nil, 1},
	} {
		if got := get(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				for _, id := range ids {
					if strings.Contains(l.GetValue(), id) || strings.Contains(l.GetValue(), s.Key) {
						t.Errorf("%s has a sandbox id or key in label %s", f.GetName(), l.GetName())
					}
				}
			}
		}
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.Label {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
