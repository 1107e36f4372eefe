package manager

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// instrumentation names the manager's tracer (its instrumentation scope).
const instrumentation = "github.com/withruntime/withruntime/internal/manager"

// The attributes of the manager's spans. They say which sandbox, where
// and how large; never its environment, metadata, image credentials or
// anything else a caller wrote into it, which may hold secrets.
const (
	idAttr        = attribute.Key("withruntime.sandbox.id")
	accountAttr   = attribute.Key("withruntime.account")
	isolationAttr = attribute.Key("withruntime.sandbox.isolation")
	vcpusAttr     = attribute.Key("withruntime.sandbox.vcpus")
	memoryAttr    = attribute.Key("withruntime.sandbox.memory_mib")
	diskAttr      = attribute.Key("withruntime.sandbox.disk_mib")
	stateAttr     = attribute.Key("withruntime.sandbox.state")
	endAttr       = attribute.Key("withruntime.sandbox.end_reason")
	backendAttr   = attribute.Key("withruntime.backend")
	bootWaitAttr  = attribute.Key("withruntime.boot.wait_ms")
	errKindAttr   = attribute.Key("withruntime.error.kind")
)

// setSpec sets the attributes of the sandbox's size and isolation.
func setSpec(span trace.Span, spec sandbox.Spec) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		isolationAttr.String(spec.Isolation),
		vcpusAttr.Int(spec.VCPUs),
		memoryAttr.Int(spec.MemoryMiB),
		diskAttr.Int(spec.DiskMiB),
	)
}

// ended ends span with err's outcome, and returns err.
func ended(span trace.Span, err error) error {
	if err != nil && span.IsRecording() {
		span.SetAttributes(errKindAttr.String(string(sandbox.KindOf(err))))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}

// opSpan is the span of one of the manager's lifecycle operations on a
// sandbox (create, pause, resume, stop, extend, set_lease, set_network,
// reap, end); the backend's calls it makes are its children.
type opSpan struct{ trace.Span }

// startOp starts the span of operation op on sandbox id ("" while it has
// none) of account ("" for the manager's own passes).
func (m *Manager) startOp(ctx context.Context, op, account, id string) (context.Context, opSpan) {
	ctx, span := m.backend().tracer.Start(ctx, "sandbox."+op)
	if span.IsRecording() {
		if id != "" {
			span.SetAttributes(idAttr.String(id))
		}
		if account != "" {
			span.SetAttributes(accountAttr.String(account))
		}
	}
	return ctx, opSpan{span}
}

// end ends the span with the operation's outcome: the record it answers
// (*out; nil when it failed) and its error. Deferred with the addresses of
// the operation's results, so that every return is seen.
func (s opSpan) end(out **sandbox.Record, err *error) {
	if s.IsRecording() {
		if rec := *out; rec != nil {
			s.SetAttributes(idAttr.String(rec.ID), stateAttr.String(string(rec.State)))
			if rec.EndReason != "" {
				s.SetAttributes(endAttr.String(string(rec.EndReason)))
			}
			setSpec(s.Span, withIsolation(rec))
		}
	}
	ended(s.Span, *err)
}
