package manager

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/withruntime/withruntime/internal/service"
)

// tracedRig is a rig whose manager records its spans in memory.
func tracedRig(t *testing.T) (*rig, *tracetest.SpanRecorder) {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return newRig(t, func(c *Config) { c.TracerProvider = tp }), spans
}

// named returns the ended spans called name.
func named(spans *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one ended span called name, or fails the test.
func one(t *testing.T, spans *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := named(spans, name)
	if len(got) != 1 {
		t.Fatalf("spans %s: got %d, want 1", name, len(got))
	}
	return got[0]
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// childOf fails the test unless child is a child span of parent.
func childOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("span %s is not a child of %s", child.Name(), parent.Name())
	}
}

// TestTraceLifecycle: each lifecycle operation makes its span, with the
// backend's call as a child span; the attributes say which sandbox, how
// large and where, and no environment value appears in any span.
func TestTraceLifecycle(t *testing.T) {
	const secret = "env-value-never-traced"
	r, spans := tracedRig(t)
	rec := r.create(service.CreateRequest{
		VCPUs: 1, MemoryMiB: 1024,
		Env:      map[string]string{"API_TOKEN": secret},
		Metadata: map[string]string{"owner": "meta-" + secret},
	})
	create, start := one(t, spans, "sandbox.create"), one(t, spans, "backend.start")
	childOf(t, start, create)
	for _, s := range []sdktrace.ReadOnlySpan{create, start} {
		a := attrs(s)
		if got := a[idAttr].AsString(); got != rec.ID {
			t.Errorf("%s: sandbox id: got %q, want %q", s.Name(), got, rec.ID)
		}
		if got := a[vcpusAttr].AsInt64(); got != 1 {
			t.Errorf("%s: vcpus: got %d, want 1", s.Name(), got)
		}
		if got := a[memoryAttr].AsInt64(); got != 1024 {
			t.Errorf("%s: memory: got %d, want 1024", s.Name(), got)
		}
		if got := a[isolationAttr].AsString(); got == "" || got != withIsolation(rec).Isolation {
			t.Errorf("%s: isolation: got %q, want %q", s.Name(), got, withIsolation(rec).Isolation)
		}
	}
	if got := attrs(create)[accountAttr].AsString(); got != "acct" {
		t.Errorf("create: account: got %q, want acct", got)
	}
	if _, ok := attrs(start)[bootWaitAttr]; !ok {
		t.Error("backend.start: no boot wait attribute")
	}

	ctx := t.Context()
	if _, err := r.m.Pause(ctx, "acct", rec.ID); err != nil {
		t.Fatal(err)
	}
	childOf(t, one(t, spans, "backend.pause"), one(t, spans, "sandbox.pause"))
	if _, err := r.m.Resume(ctx, "acct", rec.ID); err != nil {
		t.Fatal(err)
	}
	childOf(t, one(t, spans, "backend.resume"), one(t, spans, "sandbox.resume"))
	if _, err := r.m.Extend(ctx, "acct", rec.ID, 600e9); err != nil {
		t.Fatal(err)
	}
	one(t, spans, "sandbox.extend")
	if _, err := r.m.Stop(ctx, "acct", rec.ID); err != nil {
		t.Fatal(err)
	}
	stop := one(t, spans, "sandbox.stop")
	childOf(t, one(t, spans, "backend.destroy"), stop)
	if got := attrs(stop)[endAttr].AsString(); got != "stopped" {
		t.Errorf("stop: end reason: got %q, want stopped", got)
	}

	for _, s := range spans.Ended() {
		if s.Status().Code == codes.Error {
			t.Errorf("span %s failed: %s", s.Name(), s.Status().Description)
		}
		noSecret(t, s, secret)
	}
}

// noSecret fails the test when the secret appears anywhere in the span.
func noSecret(t *testing.T, s sdktrace.ReadOnlySpan, secret string) {
	t.Helper()
	kvs := append([]attribute.KeyValue(nil), s.Attributes()...)
	for _, ev := range s.Events() {
		kvs = append(kvs, ev.Attributes...)
	}
	for _, kv := range kvs {
		if strings.Contains(kv.Value.Emit(), secret) {
			t.Errorf("span %s: attribute %s holds an environment value", s.Name(), kv.Key)
		}
	}
	if strings.Contains(s.Status().Description, secret) {
		t.Errorf("span %s: its status holds an environment value", s.Name())
	}
}

// TestTraceFailedStart: a start the backend fails marks both the backend's
// span and the create's as failed, with the error's kind.
func TestTraceFailedStart(t *testing.T) {
	r, spans := tracedRig(t)
	r.be.fail = func(op, id string) error {
		if op == "start" {
			return errors.New("no room for it")
		}
		return nil
	}
	if _, err := r.m.Create(t.Context(), "acct", "", service.CreateRequest{}); err == nil {
		t.Fatal("create: got no error")
	}
	create, start := one(t, spans, "sandbox.create"), one(t, spans, "backend.start")
	childOf(t, start, create)
	if got := start.Status(); got.Code != codes.Error || !strings.Contains(got.Description, "no room for it") {
		t.Errorf("backend.start: status %v, want the backend's error", got)
	}
	if got := create.Status().Code; got != codes.Error {
		t.Errorf("sandbox.create: status %v, want an error", got)
	}
	if got := attrs(create)[errKindAttr].AsString(); got != "internal" {
		t.Errorf("sandbox.create: error kind %q, want internal", got)
	}
	// The sandbox the failed start may have left is destroyed, in the
	// create's trace.
	childOf(t, one(t, spans, "backend.destroy"), create)
}
