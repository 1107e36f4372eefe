package server

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/promexport"
)

// hostMetrics is the exporter of a process that runs sandboxes (serve
// without --store, node), or nil without --metrics-listen; it counts the
// manager's creates (it becomes cfg.Manager.Observer). Once the host is
// up, watchHost adds what it holds.
func hostMetrics(cfg *Config) *promexport.Exporter {
	if cfg.MetricsListen == "" {
		return nil
	}
	metrics := promexport.New()
	cfg.Manager.Observer = metrics
	return metrics
}

// watchHost makes metrics (nil: none) count what mgr holds at each
// scrape and what egr (nil without egress) let through or refused.
func watchHost(metrics *promexport.Exporter, mgr *manager.Manager, egr *egressServices) {
	if metrics == nil {
		return
	}
	metrics.WatchManager(mgr.Census)
	if egr != nil {
		egr.log.Observe(metrics.Egress)
	}
}

// serveMetrics serves the exporter's GET /metrics on addr (--metrics-listen),
// a listener of its own with the usual timeouts; what Serve returns goes
// to done. It returns the server and its URL.
func serveMetrics(addr string, metrics *promexport.Exporter, done chan<- error) (*http.Server, string, error) {
	ml, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: metrics.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() { done <- srv.Serve(ml) }()
	return srv, "http://" + ml.Addr().String(), nil
}

// apiObserver is what httpapi.Config.Observe gets: the exporter's, or
// nothing without one.
func apiObserver(metrics *promexport.Exporter) func(string, int, time.Duration) {
	if metrics == nil {
		return nil
	}
	return metrics.Request
}
