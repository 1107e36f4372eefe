package promexport

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/manager"
)

const namespace = "withruntime"

// Exporter holds the metrics and serves them.
type Exporter struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	creates  *prometheus.CounterVec
	createD  *prometheus.HistogramVec
	egress   *prometheus.CounterVec
	refused  *prometheus.CounterVec

	// reasons bounds the refusal reasons counted by name: past
	// maxReasons new ones count as "other".
	mu      sync.Mutex
	reasons map[string]bool
}

// maxReasons bounds the values of the reason label.
const maxReasons = 32

// New returns an exporter; WatchManager adds what a manager holds.
func New() *Exporter {
	e := &Exporter{reg: prometheus.NewRegistry(), reasons: map[string]bool{}}
	e.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "api_requests_total",
		Help: "API requests answered, by route (the route table's METHOD PATTERN, preview, or none) and status code.",
	}, []string{"route", "code"})
	e.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "api_request_duration_seconds",
		Help:    "Time to answer an API request (a stream's whole life), by route.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"route"})
	e.creates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "sandbox_creates_total",
		Help: "Sandbox creates, by isolation and outcome (pool_hit, cold, or the error code that refused it).",
	}, []string{"isolation", "outcome"})
	e.createD = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "sandbox_create_duration_seconds",
		Help:    "Time from a create's start to its answer, by outcome.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"outcome"})
	e.egress = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "egress_events_total",
		Help: "Sandboxes' outbound connections and DNS queries the egress services saw, by kind (dns, tcp, tls, http) and verdict.",
	}, []string{"kind", "verdict"})
	e.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "egress_refused_total",
		Help: "Refused outbound connections and DNS queries, by kind and reason.",
	}, []string{"kind", "reason"})
	e.reg.MustRegister(e.requests, e.latency, e.creates, e.createD, e.egress, e.refused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return e
}

// WatchManager makes every scrape ask census for what the manager holds
// (an API server of many hosts runs no sandbox and has none).
func (e *Exporter) WatchManager(census func(context.Context) (manager.Census, error)) {
	e.reg.MustRegister(&censusCollector{census: census})
}

// Handler serves GET /metrics in Prometheus' text format.
func (e *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{}))
	return mux
}

// Request counts an answered API request (httpapi.Config.Observe).
func (e *Exporter) Request(route string, status int, d time.Duration) {
	e.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	e.latency.WithLabelValues(route).Observe(d.Seconds())
}

// Created counts a create (manager.Observer).
func (e *Exporter) Created(isolation, outcome string, d time.Duration) {
	e.creates.WithLabelValues(isolation, outcome).Inc()
	e.createD.WithLabelValues(outcome).Observe(d.Seconds())
}

// Egress counts an egress event (egress.Log.Observe).
func (e *Exporter) Egress(ev egress.Event) {
	e.egress.WithLabelValues(ev.Kind, ev.Verdict).Inc()
	if ev.Verdict != egress.Allowed {
		e.refused.WithLabelValues(ev.Kind, e.reason(ev.Reason)).Inc()
	}
}

// reason is a refusal's reason as a label: its text before any detail
// (": ..."), and "other" once maxReasons distinct ones were seen.
func (e *Exporter) reason(r string) string {
	r, _, _ = strings.Cut(r, ":")
	r = strings.TrimSpace(r)
	if len(r) > 48 {
		r = r[:48]
	}
	if r == "" {
		r = "none"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.reasons[r] {
		if len(e.reasons) >= maxReasons {
			return "other"
		}
		e.reasons[r] = true
	}
	return r
}

// censusCollector asks the manager at each scrape.
type censusCollector struct {
	census func(context.Context) (manager.Census, error)
}

var (
	sandboxesDesc = prometheus.NewDesc(namespace+"_sandboxes", "Sandboxes of this host that have not ended, by isolation and state.", []string{"isolation", "state"}, nil)
	heldDesc      = prometheus.NewDesc(namespace+"_admission_held", "What admission handed out to live sandboxes, by resource (vcpus, memory_mib, disk_mib).", []string{"resource"}, nil)
	capacityDesc  = prometheus.NewDesc(namespace+"_admission_capacity", "What admission may hand out (the host's, times the overcommit ratio; disk: the data dir's free space times it), by resource.", []string{"resource"}, nil)
	poolDesc      = prometheus.NewDesc(namespace+"_pool_ready", "Warm sandboxes ready in each pool (--pool, by template and size).", []string{"pool"}, nil)
	censusUpDesc  = prometheus.NewDesc(namespace+"_census_up", "1 when the manager could be counted at this scrape (the store answered).", nil, nil)
)

func (c *censusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sandboxesDesc, heldDesc, capacityDesc, poolDesc, censusUpDesc} {
		ch <- d
	}
}

func (c *censusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := c.census(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(censusUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(censusUpDesc, prometheus.GaugeValue, 1)
	for k, n := range cs.Sandboxes {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for _, r := range []struct {
		name     string
		held     int
		capacity float64
		capKnown bool
	}{
		{"vcpus", cs.VCPUsHeld, cs.VCPUsCapacity, true},
		{"memory_mib", cs.MemoryMiBHeld, cs.MemoryMiBCapacity, true},
		{"disk_mib", cs.DiskMiBHeld, cs.DiskCapacity, cs.DiskCapacity >= 0},
	} {
		ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(r.held), r.name)
		if r.capKnown {
			ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, r.capacity, r.name)
		}
	}
	for p, n := range cs.PoolReady {
		ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(n), p)
	}
}
