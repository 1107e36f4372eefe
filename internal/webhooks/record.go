package webhooks

import (
	"encoding/json"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/template"
)

// Source is the event source (store.EventSource) of the webhooks: a
// sandbox record's change of state appends sandbox.created, .paused,
// .resumed or .ended, a template's insert template.built, in the write's
// own transaction; notify (when not nil) is called after each commits,
// to wake a Worker.
//
// A change is what the write did to the stored record: the store hands
// over the record it replaced (a conditional write succeeds only over the
// version read, so it is exactly what was replaced).
func Source(notify func()) store.EventSource {
	return store.EventSource{Sandbox: sandboxEventOf, Template: templateEventOf, Appended: notify}
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

// sandboxEventOf is the event of the change from old to r (nil: none).
func sandboxEventOf(old, r *sandbox.Record) (*store.Event, error) {
	typ := sandboxEvent(old, r)
	if typ == "" {
		return nil, nil
	}
	d := SandboxData{SandboxID: r.ID, State: string(r.State), Template: r.Spec.Image, Metadata: r.Spec.Metadata}
	if typ == SandboxEnded {
		cost := r.Usage.CostNanos / 1000
		d.EndReason, d.EndMessage, d.CostMicros = string(r.EndReason), r.EndMessage, &cost
	}
	return event(r.Account, typ, r.ID, d)
}

// templateEventOf is template.built of t.
func templateEventOf(t *template.Template) (*store.Event, error) {
	return event(t.Account, TemplateBuilt, t.ID, TemplateData{TemplateID: t.ID, Name: t.Name, Tag: t.Tag, SizeBytes: t.SizeBytes})
}

func event(account, typ, subject string, data any) (*store.Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return &store.Event{Account: account, Type: typ, Subject: subject, Data: raw}, nil
}
