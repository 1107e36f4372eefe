package server

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv/otlptest"
)

// TestTracingOff: without an OTLP endpoint in the environment the manager
// gets no tracer provider (its default makes no spans).
func TestTracingOff(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	cfg := Config{Logger: slog.New(slog.DiscardHandler)}
	shutdown, err := openTracing(t.Context(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Manager.TracerProvider != nil {
		t.Error("no endpoint set: got a tracer provider")
	}
	if err := shutdown(t.Context()); err != nil {
		t.Error(err)
	}
}

// TestTracingExports: with OTEL_EXPORTER_OTLP_ENDPOINT set, spans reach
// an OTLP/HTTP collector (one on loopback here) by the time the export is
// shut down, as service withruntime.
func TestTracingExports(t *testing.T) {
	collector := otlptest.Start(t)

	cfg := Config{Logger: slog.New(slog.DiscardHandler)}
	shutdown, err := openTracing(t.Context(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Manager.TracerProvider == nil {
		t.Fatal("endpoint set: got no tracer provider")
	}
	_, span := cfg.Manager.TracerProvider.Tracer("test").Start(t.Context(), "sandbox.create")
	span.End()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutting the export down: %v", err)
	}
	res := collector.Resources()
	if len(res) != 1 {
		t.Fatalf("resources received by the end of the shutdown: got %d, want 1", len(res))
	}
	if name := res[0]["service.name"]; name != "withruntime" {
		t.Errorf("service.name: got %q, want withruntime", name)
	}
	var spans []string
	for _, s := range collector.Spans() {
		spans = append(spans, s.GetName())
	}
	if len(spans) != 1 || spans[0] != "sandbox.create" {
		t.Errorf("spans exported: got %v, want [sandbox.create]", spans)
	}
}
