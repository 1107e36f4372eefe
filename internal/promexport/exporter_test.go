package promexport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// scrape reads the exporter's GET /metrics as Prometheus would, with its
// text parser.
func scrape(t *testing.T, e *Exporter) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parsing the scrape: %v\n%s", err, b)
	}
	return fams
}

// value is the value of the family's metric with labels (name=value
// pairs), or -1 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// sample is a value a scrape must have: the family's metric with labels
// (name=value pairs).
type sample struct {
	name   string
	labels []string
	want   float64
}

// checkValues fails t for each sample fams does not have.
func checkValues(t *testing.T, fams map[string]*dto.MetricFamily, want []sample) {
	t.Helper()
	for _, c := range want {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestExporterCounts(t *testing.T) {
	e := New()
	for range 3 {
		e.Request("POST /v1/sandboxes", 201, 20*time.Millisecond)
	}
	e.Request("GET /v1/sandboxes/{id}", 404, time.Millisecond)
	e.Request("preview", 502, time.Millisecond)
	e.Created("gvisor", "pool_hit", 5*time.Millisecond)
	e.Created("gvisor", "cold", 200*time.Millisecond)
	e.Created("gvisor", "cold", 300*time.Millisecond)
	e.Created("microvm", "capacity_exhausted", time.Millisecond)
	e.Egress(egress.Event{Kind: "tcp", Verdict: egress.Allowed, Name: "example.com"})
	e.Egress(egress.Event{Kind: "dns", Verdict: "refused", Reason: "name not allowed", Name: "secret-name.example"})
	e.Egress(egress.Event{Kind: "tls", Verdict: "refused", Reason: "IP literal: 10.1.2.3"})
	e.WatchManager(func(context.Context) (manager.Census, error) {
		return manager.Census{
			Sandboxes: map[[2]string]int{{"gvisor", "running"}: 4, {"gvisor", "paused"}: 1},
			VCPUsHeld: 8, MemoryMiBHeld: 8192, DiskMiBHeld: 40960,
			VCPUsCapacity: 16, MemoryMiBCapacity: 32768, DiskCapacity: -1,
			PoolReady: map[string]int{"2x4096": 3, "web:latest:1x1024": 0},
		}, nil
	})
	fams := scrape(t, e)
	checkValues(t, fams, []sample{
		{"withruntime_api_requests_total", []string{"route", "POST /v1/sandboxes", "code", "201"}, 3},
		{"withruntime_api_requests_total", []string{"route", "preview", "code", "502"}, 1},
		{"withruntime_api_request_duration_seconds", []string{"route", "POST /v1/sandboxes"}, 3},
		{"withruntime_sandbox_creates_total", []string{"isolation", "gvisor", "outcome", "cold"}, 2},
		{"withruntime_sandbox_creates_total", []string{"isolation", "microvm", "outcome", "capacity_exhausted"}, 1},
		{"withruntime_sandbox_create_duration_seconds", []string{"outcome", "pool_hit"}, 1},
		{"withruntime_egress_events_total", []string{"kind", "dns", "verdict", "refused"}, 1},
		{"withruntime_egress_refused_total", []string{"kind", "tls", "reason", "IP literal"}, 1},
		{"withruntime_sandboxes", []string{"isolation", "gvisor", "state", "running"}, 4},
		{"withruntime_admission_held", []string{"resource", "vcpus"}, 8},
		{"withruntime_admission_capacity", []string{"resource", "memory_mib"}, 32768},
		{"withruntime_pool_ready", []string{"pool", "web:latest:1x1024"}, 0},
		{"withruntime_census_up", nil, 1},
	})
	if got := value(fams, "withruntime_admission_capacity", "resource", "disk_mib"); got != -1 {
		t.Errorf("an unknown disk capacity is shown as %v, want no sample", got)
	}
	// Nothing a tenant named is a label.
	for _, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if v := l.GetValue(); v == "secret-name.example" || v == "example.com" || v == "10.1.2.3" {
					t.Errorf("%s has label %s=%q", f.GetName(), l.GetName(), v)
				}
			}
		}
	}
}

// TestReasonsBounded: past maxReasons distinct reasons, the rest count as
// "other".
func TestReasonsBounded(t *testing.T) {
	e := New()
	for i := range 3 * maxReasons {
		e.Egress(egress.Event{Kind: "tcp", Verdict: "refused", Reason: fmt.Sprintf("reason %d", i)})
	}
	fams := scrape(t, e)
	if n := len(fams["withruntime_egress_refused_total"].Metric); n != maxReasons+1 {
		t.Errorf("%d reason labels, want %d and other", n, maxReasons)
	}
	if got := value(fams, "withruntime_egress_refused_total", "reason", "other"); got != 2*maxReasons {
		t.Errorf("other: %v, want %d", got, 2*maxReasons)
	}
}

// TestCensusDown: a census that fails says so, and nothing else of it.
func TestCensusDown(t *testing.T) {
	e := New()
	e.WatchManager(func(context.Context) (manager.Census, error) { return manager.Census{}, fmt.Errorf("store down") })
	fams := scrape(t, e)
	if got := value(fams, "withruntime_census_up"); got != 0 {
		t.Errorf("census_up %v, want 0", got)
	}
	if fams["withruntime_sandboxes"] != nil {
		t.Error("sandboxes reported though the census failed")
	}
}

// TestGrafanaDashboard: every metric the dashboard in deploy/ queries is
// one the exporter serves.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.Root(), "deploy", "grafana", "withruntime.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	e := New()
	e.Request("GET /v1/health", 200, time.Millisecond)
	e.Created("gvisor", "cold", time.Second)
	e.Egress(egress.Event{Kind: "tcp", Verdict: "refused", Reason: "x"})
	e.WatchManager(func(context.Context) (manager.Census, error) {
		return manager.Census{Sandboxes: map[[2]string]int{{"gvisor", "running"}: 1}, PoolReady: map[string]int{"1x512": 1}}, nil
	})
	// The panels of many hosts: an API server's registry.
	st := storetest.OpenBolt(t)
	if err := st.RegisterNode(t.Context(), &store.Node{ID: "node-a", CPUs: 1, MemoryMiB: 1024}, time.Hour); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := st.PutSandbox(t.Context(), &sandbox.Record{ID: "sb", Account: "a", Node: "node-a", State: sandbox.StateRunning, CreatedAt: now, LeaseEndsAt: now.Add(time.Hour), Backend: "gvisor"}); err != nil {
		t.Fatal(err)
	}
	e.WatchCluster(st)
	served := map[string]bool{}
	for name, f := range scrape(t, e) {
		served[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			served[name+"_bucket"] = true
		}
	}
	re := regexp.MustCompile(`withruntime_[a-z_]+`)
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, name := range re.FindAllString(tg.Expr, -1) {
				n++
				if !served[name] {
					t.Errorf("panel %q queries %s, which the exporter does not serve", p.Title, name)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("the dashboard queries no metric")
	}
}
