package server

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// serviceName is the service.name of the spans a server exports (the
// standard OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES override it).
const serviceName = "withruntime"

// tracingOn reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT, or the traces' own
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and the SDK is not disabled
// (OTEL_SDK_DISABLED=true).
func tracingOn() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// openTracing gives the manager of cfg a tracer provider that exports its
// spans over OTLP/HTTP when the environment asks for traces (tracingOn;
// the exporter reads the other standard OTEL_EXPORTER_OTLP_* settings, the
// headers and the timeout say, itself), unless cfg names a provider
// already (tests). It returns what flushes and stops the export; without
// one the manager makes no spans at all, at no cost.
func openTracing(ctx context.Context, cfg *Config) (shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	if cfg.Manager.TracerProvider != nil || !tracingOn() {
		return none, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return none, fmt.Errorf("starting the OTLP trace exporter: %w", err)
	}
	// The environment's attributes come last: they override the name.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithFromEnv(),
	)
	if err != nil {
		exp.Shutdown(ctx)
		return none, fmt.Errorf("describing the traces' resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	cfg.Manager.TracerProvider = tp
	cfg.Logger.Info("exporting traces over OTLP/HTTP")
	return tp.Shutdown, nil
}
