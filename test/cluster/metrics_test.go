package cluster

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metrics is one scrape, parsed as Prometheus parses it.
type metrics map[string]*dto.MetricFamily

// scrape reads GET /metrics at base (an API server's or a node's
// --metrics-listen).
func (r *rig) scrape(base string) metrics {
	r.t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		r.t.Fatalf("scraping %s: %v", base, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		r.t.Fatalf("scraping %s: %d %s", base, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		r.t.Fatalf("parsing the scrape of %s: %v", base, err)
	}
	return fams
}

// nodeMetrics is node n's --metrics-listen, as a URL.
func nodeMetrics(n *node) string { return "http://" + n.addr + ":" + metricsPort }

// sum is the sum of the family's samples whose labels include the given
// name=value pairs (-1 when the family is absent).
func (m metrics) sum(name string, labels ...string) float64 {
	f := m[name]
	if f == nil {
		return -1
	}
	total := 0.0
next:
	for _, s := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range s.Label {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			if !found {
				continue next
			}
		}
		total += s.GetGauge().GetValue() + s.GetCounter().GetValue()
	}
	return total
}

// sample is a value a scrape must have: the sum of the family's samples
// with labels (name=value pairs).
type sample struct {
	name   string
	labels []string
	want   float64
}

// check fails t for each sample m (of who) does not have.
func (m metrics) check(t *testing.T, who string, want []sample) {
	t.Helper()
	for _, c := range want {
		if got := m.sum(c.name, c.labels...); got != c.want {
			t.Errorf("%s: %s%v = %v, want %v", who, c.name, c.labels, got, c.want)
		}
	}
}

// checkPlacedMetrics: with one running sandbox on each of the three
// nodes, each API server's scrape shows three nodes up, the store up and
// the three sandboxes; each node's own shows its one sandbox and what
// admission holds for it.
func (r *rig) checkPlacedMetrics() {
	t := r.t
	t.Helper()
	for _, a := range r.apis {
		m := r.scrape(a.metrics)
		m.check(t, a.name, []sample{
			{"withruntime_store_up", nil, 1},
			{"withruntime_nodes", []string{"state", "up"}, 3},
			{"withruntime_nodes", []string{"state", "lost"}, 0},
			{"withruntime_cluster_sandboxes", []string{"state", "running"}, 3},
		})
		for _, n := range r.nodes {
			if got := m.sum("withruntime_node_up", "node", n.id); got != 1 {
				t.Errorf("%s: node_up of %s = %v, want 1", a.name, n.name, got)
			}
			if got := m.sum("withruntime_node_heartbeat_age_seconds", "node", n.id); got < 0 || got > nodeLease.Seconds() {
				t.Errorf("%s: heartbeat age of %s = %v s, want within its %v lease", a.name, n.name, got, nodeLease)
			}
		}
	}
	for _, n := range r.nodes {
		m := r.scrape(nodeMetrics(n))
		m.check(t, n.name, []sample{
			{"withruntime_census_up", nil, 1},
			{"withruntime_sandboxes", []string{"state", "running"}, 1},
			{"withruntime_admission_held", []string{"resource", "vcpus"}, 1},
			{"withruntime_admission_held", []string{"resource", "memory_mib"}, 512},
			{"withruntime_sandbox_creates_total", nil, 1},
		})
	}
}

// checkLostMetrics: once node n was declared lost, an API server's scrape
// says so, of it and in the counts.
func (r *rig) checkLostMetrics(n *node) {
	t := r.t
	t.Helper()
	m := r.scrape(r.apis[1].metrics)
	m.check(t, r.apis[1].name, []sample{
		{"withruntime_store_up", nil, 1},
		{"withruntime_nodes", []string{"state", "up"}, 2},
		{"withruntime_nodes", []string{"state", "lost"}, 1},
		{"withruntime_node_up", []string{"node", n.id}, 0},
	})
	if got := m.sum("withruntime_node_heartbeat_age_seconds", "node", n.id); got < nodeLease.Seconds() {
		t.Errorf("heartbeat age of the lost %s = %v s, want past its %v lease", n.name, got, nodeLease)
	}
}
