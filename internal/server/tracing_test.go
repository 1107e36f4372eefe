package server

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
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
	got := make(chan *coltrace.ExportTraceServiceRequest, 8)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		req := &coltrace.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(data, req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- req
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	t.Setenv("OTEL_SDK_DISABLED", "")

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
	select {
	case req := <-got:
		rs := req.GetResourceSpans()
		if len(rs) != 1 {
			t.Fatalf("resource spans: got %d, want 1", len(rs))
		}
		name := ""
		for _, kv := range rs[0].GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				name = kv.GetValue().GetStringValue()
			}
		}
		if name != "withruntime" {
			t.Errorf("service.name: got %q, want withruntime", name)
		}
		var spans []string
		for _, ss := range rs[0].GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				spans = append(spans, s.GetName())
			}
		}
		if len(spans) != 1 || spans[0] != "sandbox.create" {
			t.Errorf("spans exported: got %v, want [sandbox.create]", spans)
		}
	default:
		t.Fatal("the collector received nothing by the end of the shutdown")
	}
}
