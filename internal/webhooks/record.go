package webhooks

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/template"
)

// Record returns st with every sandbox state change and every template
// insert appending an event to st's log, after the write that made it
// succeeded; notify (when not nil) is then called, to wake a Worker. An
// event that cannot be appended is logged and lost: the change itself
// stands (a webhook is a notice, not the record).
//
// A change is what the write did to the stored record: the previous one
// is read first (a conditional write succeeds only over the version read,
// so it is exactly what was replaced).
func Record(st store.Store, log *slog.Logger, notify func()) store.Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &recording{Store: st, log: log, notify: notify}
}

type recording struct {
	store.Store
	log    *slog.Logger
	notify func()
}

// SandboxData is the payload of the sandbox events.
type SandboxData struct {
	SandboxID string            `json:"sandbox_id"`
	State     string            `json:"state"`
	Template  string            `json:"template,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	// EndReason and CostMicros (its final cost, USD millionths) are set on
	// sandbox.ended.
	EndReason  string `json:"end_reason,omitempty"`
	EndMessage string `json:"end_message,omitempty"`
	CostMicros *int64 `json:"cost_micros,omitempty"`
}

// TemplateData is the payload of template.built.
type TemplateData struct {
	TemplateID string `json:"template_id"`
	Name       string `json:"name"`
	Tag        string `json:"tag"`
	SizeBytes  int64  `json:"size_bytes"`
}

// sandboxEvent is the event type of a change from old (nil: none) to r,
// or "" for none.
func sandboxEvent(old, r *sandbox.Record) string {
	if old != nil && old.State == r.State {
		return ""
	}
	switch r.State {
	case sandbox.StateRunning:
		// A resume writes starting (from paused) first: its record still
		// says when it was paused.
		if old != nil && old.PausedAt != nil {
			return SandboxResumed
		}
		return SandboxCreated
	case sandbox.StatePaused:
		return SandboxPaused
	case sandbox.StateEnded:
		return SandboxEnded
	}
	return ""
}

// before reads the record r replaces (nil for an insert or when it cannot
// be read).
func (s *recording) before(ctx context.Context, r *sandbox.Record) *sandbox.Record {
	if r == nil || r.Version == 0 {
		return nil
	}
	old, err := s.Store.GetSandbox(ctx, r.ID)
	if err != nil || old.Version != r.Version {
		return nil
	}
	return old
}

func (s *recording) after(ctx context.Context, old, r *sandbox.Record) {
	typ := sandboxEvent(old, r)
	if typ == "" {
		return
	}
	d := SandboxData{SandboxID: r.ID, State: string(r.State), Template: r.Spec.Image, Metadata: r.Spec.Metadata}
	if typ == SandboxEnded {
		cost := r.Usage.CostNanos / 1000
		d.EndReason, d.EndMessage, d.CostMicros = string(r.EndReason), r.EndMessage, &cost
	}
	s.append(ctx, r.Account, typ, r.ID, d)
}

func (s *recording) append(ctx context.Context, account, typ, subject string, data any) {
	raw, err := json.Marshal(data)
	if err == nil {
		err = s.Store.AppendEvent(context.WithoutCancel(ctx), &store.Event{Account: account, Type: typ, Subject: subject, Data: raw})
	}
	if err != nil {
		s.log.Warn("appending a webhook event", "type", typ, "subject", subject, "error", err)
		return
	}
	if s.notify != nil {
		s.notify()
	}
}

func (s *recording) PutSandbox(ctx context.Context, r *sandbox.Record) error {
	old := s.before(ctx, r)
	if err := s.Store.PutSandbox(ctx, r); err != nil {
		return err
	}
	s.after(ctx, old, r)
	return nil
}

func (s *recording) AdmitSandbox(ctx context.Context, r *sandbox.Record, limit int) error {
	old := s.before(ctx, r)
	if err := s.Store.AdmitSandbox(ctx, r, limit); err != nil {
		return err
	}
	s.after(ctx, old, r)
	return nil
}

func (s *recording) RecordUsage(ctx context.Context, r *sandbox.Record, delta store.UsageDelta) error {
	old := s.before(ctx, r)
	if err := s.Store.RecordUsage(ctx, r, delta); err != nil {
		return err
	}
	s.after(ctx, old, r)
	return nil
}

func (s *recording) built(ctx context.Context, t *template.Template) {
	s.append(ctx, t.Account, TemplateBuilt, t.ID, TemplateData{TemplateID: t.ID, Name: t.Name, Tag: t.Tag, SizeBytes: t.SizeBytes})
}

func (s *recording) PutTemplate(ctx context.Context, t *template.Template, q store.TemplateQuota) error {
	if err := s.Store.PutTemplate(ctx, t, q); err != nil {
		return err
	}
	s.built(ctx, t)
	return nil
}

func (s *recording) ReplaceTemplate(ctx context.Context, t *template.Template, q store.TemplateQuota) (*template.Template, error) {
	old, err := s.Store.ReplaceTemplate(ctx, t, q)
	if err != nil {
		return old, err
	}
	s.built(ctx, t)
	return old, nil
}
