package server

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/internal/promexport"
)

// serveMetrics serves the exporter's GET /metrics on addr (serve
// --metrics-listen), a listener of its own with the usual timeouts.
func (s *Server) serveMetrics(addr string, metrics *promexport.Exporter) error {
	ml, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	s.metrics, s.MetricsURL = &http.Server{Handler: metrics.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}, "http://"+ml.Addr().String()
	go func() { s.done <- s.metrics.Serve(ml) }()
	return nil
}

// apiObserver is what httpapi.Config.Observe gets: the exporter's, or
// nothing without one.
func apiObserver(metrics *promexport.Exporter) func(string, int, time.Duration) {
	if metrics == nil {
		return nil
	}
	return metrics.Request
}
