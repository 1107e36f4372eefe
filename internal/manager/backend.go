package manager

import (
	"context"
	"io"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/sync/semaphore"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// DefaultMaxConcurrentBoots is Config.MaxConcurrentBoots's default: two
// boots per CPU. A cold gVisor boot is CPU-bound (the benchmark's burst of
// 10 on 2 cores answers each in about five times a sequential boot's
// time: they share the CPUs, none finishes sooner), so more boots at once
// only stretch every one of them; two per CPU keep the CPUs busy through
// a boot's waits (mounts, the agent's handshake) while a burst larger
// than that queues, and the first in line come up first.
func DefaultMaxConcurrentBoots() int { return 2 * runtime.NumCPU() }

// backendCalls is the manager's backend as the manager calls it: the
// adapter that answers for the optional capabilities (sandbox.Adapt), with
// a child span of the caller's around each call that takes a context, and
// at most Config.MaxConcurrentBoots boots (Start, StartWarm, Resume,
// ResumeDigest) under way at once. It is the one place that does either:
// the manager's call sites only call.
type backendCalls struct {
	*sandbox.Adapter
	tracer trace.Tracer
	// boots holds a unit for each boot under way; a boot waits for one
	// (in order of arrival) as long as its context lets it.
	boots *semaphore.Weighted
}

// newBackendCalls wraps the configured backend; a Config without a tracer
// provider (one not made by New, in a test) traces nothing.
func newBackendCalls(cfg Config) *backendCalls {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	n := cfg.MaxConcurrentBoots
	if n < 1 {
		n = DefaultMaxConcurrentBoots()
	}
	return &backendCalls{
		Adapter: sandbox.Adapt(cfg.Backend),
		tracer:  tp.Tracer(instrumentation),
		boots:   semaphore.NewWeighted(int64(n)),
	}
}

// span starts the span of backend call op on sandbox id ("" for none).
func (b *backendCalls) span(ctx context.Context, op, id string) (context.Context, trace.Span) {
	ctx, span := b.tracer.Start(ctx, "backend."+op, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(backendAttr.String(b.Name()))
		if id != "" {
			span.SetAttributes(idAttr.String(id))
		}
	}
	return ctx, span
}

// boot runs start once a boot slot is free, in span; waiting ends with
// ctx's error when ctx ends first, and nothing was started then.
func (b *backendCalls) boot(ctx context.Context, span trace.Span, start func() (sandbox.Instance, error)) (sandbox.Instance, error) {
	began := time.Now()
	if err := b.boots.Acquire(ctx, 1); err != nil {
		return nil, ended(span, err)
	}
	defer b.boots.Release(1)
	if span.IsRecording() {
		span.SetAttributes(bootWaitAttr.Int64(time.Since(began).Milliseconds()))
	}
	inst, err := start()
	return inst, ended(span, err)
}

func (b *backendCalls) Start(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	ctx, span := b.span(ctx, "start", id)
	setSpec(span, spec)
	return b.boot(ctx, span, func() (sandbox.Instance, error) { return b.Adapter.Start(ctx, id, spec) })
}

func (b *backendCalls) StartWarm(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	ctx, span := b.span(ctx, "start_warm", id)
	setSpec(span, spec)
	return b.boot(ctx, span, func() (sandbox.Instance, error) { return b.Adapter.StartWarm(ctx, id, spec) })
}

func (b *backendCalls) Resume(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	ctx, span := b.span(ctx, "resume", id)
	setSpec(span, spec)
	return b.boot(ctx, span, func() (sandbox.Instance, error) { return b.Adapter.Resume(ctx, id, spec) })
}

func (b *backendCalls) ResumeDigest(ctx context.Context, id string, spec sandbox.Spec, digest string) (sandbox.Instance, error) {
	ctx, span := b.span(ctx, "resume", id)
	setSpec(span, spec)
	return b.boot(ctx, span, func() (sandbox.Instance, error) { return b.Adapter.ResumeDigest(ctx, id, spec, digest) })
}

func (b *backendCalls) StartSnapshot(ctx context.Context, id string, spec sandbox.Spec, dir string) (sandbox.Instance, error) {
	ctx, span := b.span(ctx, "start_snapshot", id)
	setSpec(span, spec)
	return b.boot(ctx, span, func() (sandbox.Instance, error) { return b.Adapter.StartSnapshot(ctx, id, spec, dir) })
}

func (b *backendCalls) Snapshot(ctx context.Context, id, dir string) error {
	ctx, span := b.span(ctx, "snapshot", id)
	return ended(span, b.Adapter.Snapshot(ctx, id, dir))
}

func (b *backendCalls) Attach(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	ctx, span := b.span(ctx, "attach", id)
	inst, err := b.Adapter.Attach(ctx, id, spec)
	return inst, ended(span, err)
}

func (b *backendCalls) Pause(ctx context.Context, id string) error {
	ctx, span := b.span(ctx, "pause", id)
	return ended(span, b.Adapter.Pause(ctx, id))
}

func (b *backendCalls) Destroy(ctx context.Context, id string) error {
	ctx, span := b.span(ctx, "destroy", id)
	return ended(span, b.Adapter.Destroy(ctx, id))
}

func (b *backendCalls) Sweep(ctx context.Context, keep func(id string) bool) error {
	ctx, span := b.span(ctx, "sweep", "")
	return ended(span, b.Adapter.Sweep(ctx, keep))
}

func (b *backendCalls) Claim(ctx context.Context, id string) error {
	ctx, span := b.span(ctx, "claim", id)
	return ended(span, b.Adapter.Claim(ctx, id))
}

func (b *backendCalls) Freeze(ctx context.Context, id string) error {
	ctx, span := b.span(ctx, "freeze", id)
	return ended(span, b.Adapter.Freeze(ctx, id))
}

func (b *backendCalls) Thaw(ctx context.Context, id string) error {
	ctx, span := b.span(ctx, "thaw", id)
	return ended(span, b.Adapter.Thaw(ctx, id))
}

func (b *backendCalls) ExportRoot(ctx context.Context, id string, w io.Writer) error {
	ctx, span := b.span(ctx, "export_root", id)
	return ended(span, b.Adapter.ExportRoot(ctx, id, w))
}
