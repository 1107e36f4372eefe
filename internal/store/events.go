package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// Events keeps what the lifecycle webhooks deliver and the audit log: an
// ordered log of events (sandbox.created, sandbox.ended, template.built,
// ...), the accounts' webhook registrations with each one's delivery
// cursor and a bounded log of its deliveries, and the audit entries of
// every change made through the API.
//
// An event's Seq orders it among every event of the store: a later append
// has a larger Seq, and it is visible only after every smaller one is, so
// that a reader that has seen Seq n never finds a smaller one later (the
// webhook cursor depends on it).
type Events interface {
	// AppendEvent adds e to the log; Seq and, when zero, At are set.
	AppendEvent(ctx context.Context, e *Event) error
	// ListEvents returns account's events after Seq after, oldest first,
	// at most limit (every account's when account is "").
	ListEvents(ctx context.Context, account string, after int64, limit int) ([]Event, error)
	// LastEventSeq is the largest Seq appended so far (0 for none).
	LastEventSeq(ctx context.Context) (int64, error)
	// PruneEvents removes the events made before before, and the audit
	// entries made before auditBefore, and reports how many of each.
	PruneEvents(ctx context.Context, before, auditBefore time.Time) (events, audit int, err error)

	// PutWebhook inserts w, a new registration, unless its account holds
	// max of them already (forbidden) or one has w's ID (conflict). Its
	// cursor starts at the last event appended: it hears what comes after.
	PutWebhook(ctx context.Context, w *Webhook, max int) error
	// ListWebhooks returns account's webhooks, oldest first (every
	// account's when account is "").
	ListWebhooks(ctx context.Context, account string) ([]Webhook, error)
	// GetWebhook returns the webhook with id.
	GetWebhook(ctx context.Context, id string) (*Webhook, error)
	// DeleteWebhook removes account's webhook id and its delivery log.
	DeleteWebhook(ctx context.Context, account, id string) error
	// AdvanceWebhook moves webhook id's cursor to seq (never back) and,
	// when d is set, adds d to its delivery log, which keeps the last
	// MaxDeliveries entries.
	AdvanceWebhook(ctx context.Context, id string, seq int64, d *Delivery) error
	// ListDeliveries returns webhook id's delivery log, newest first, at
	// most limit.
	ListDeliveries(ctx context.Context, id string, limit int) ([]Delivery, error)

	// AppendAudit adds a to the audit log; Seq and, when zero, At are set.
	AppendAudit(ctx context.Context, a *AuditEntry) error
	// ListAudit returns the audit entries made at or after since, oldest
	// first, at most limit.
	ListAudit(ctx context.Context, since time.Time, limit int) ([]AuditEntry, error)

	// SetEventSource makes every later sandbox write (PutSandbox,
	// AdmitSandbox, RecordUsage) and template insert (PutTemplate,
	// ReplaceTemplate) append the events src makes of it in the write's
	// own transaction. Call it before the store is shared.
	SetEventSource(src EventSource)
}

// EventSource makes the events of the writes webhooks announce: a
// sandbox record's change of state, a template's insert. A store given
// one appends what it makes in the same transaction as the write: a
// change never commits without its event, nor an event without its change,
// so a process killed between the two cannot lose one (the durable queue
// of the webhooks).
type EventSource struct {
	// Sandbox is the event of the change from old (nil: an insert) to r,
	// or nil for none.
	Sandbox func(old, r *sandbox.Record) (*Event, error)
	// Template is the event of t's insert, or nil for none.
	Template func(t *template.Template) (*Event, error)
	// Appended, when set, is called once a write that appended an event
	// has committed (to wake what delivers them).
	Appended func()
}

// MaxDeliveries is how many deliveries each webhook's log keeps.
const MaxDeliveries = 50

// Event is one entry of the event log.
type Event struct {
	Seq     int64  `json:"seq"`
	Account string `json:"account"`
	// Type is the event's name (sandbox.created, ..., template.built).
	Type string `json:"type"`
	// Subject is the id of what the event is about (a sandbox's, a
	// template's).
	Subject string    `json:"subject"`
	At      time.Time `json:"at"`
	// Data is the event's payload as the webhook delivers it.
	Data json.RawMessage `json:"data,omitempty"`
}

// Webhook is an account's registration of a URL that hears its events.
type Webhook struct {
	ID      string   `json:"id"`
	Account string   `json:"account"`
	URL     string   `json:"url"`
	Events  []string `json:"events"`
	// Secret signs the deliveries (the whsec_ string shown once).
	Secret    string    `json:"secret"`
	CreatedAt time.Time `json:"created_at"`
	// Cursor is the Seq of the last event handled (delivered, failed for
	// good, or not one the webhook hears).
	Cursor int64 `json:"cursor"`
}

// Wants reports whether w hears events of type typ.
func (w *Webhook) Wants(typ string) bool {
	for _, e := range w.Events {
		if e == typ {
			return true
		}
	}
	return false
}

// Delivery statuses.
const (
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// Delivery is one event's delivery to a webhook, as it ended.
type Delivery struct {
	Webhook   string    `json:"webhook"`
	EventSeq  int64     `json:"event_seq"`
	EventType string    `json:"event_type"`
	Subject   string    `json:"subject"`
	Status    string    `json:"status"`
	Attempts  int       `json:"attempts"`
	HTTPCode  int       `json:"http_code,omitempty"`
	Error     string    `json:"error,omitempty"`
	At        time.Time `json:"at"`
}

// AuditEntry is one change made through the API: who (the key's id and
// account), what (Action on Target), when and from where.
type AuditEntry struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Account string    `json:"account"`
	KeyID   string    `json:"key_id"`
	Action  string    `json:"action"`
	Target  string    `json:"target,omitempty"`
	Remote  string    `json:"remote,omitempty"`
}

// checkWebhook refuses registrations no store may hold.
func checkWebhook(w *Webhook) error {
	switch {
	case w == nil || w.ID == "" || !storable(w.ID):
		return sandbox.Errorf(sandbox.KindInvalid, "webhook needs an id")
	case w.Account == "" || !storable(w.Account, w.URL, w.Secret):
		return sandbox.Errorf(sandbox.KindInvalid, "webhook %s needs an account, and text the store can keep", w.ID)
	}
	return nil
}

// tooManyWebhooks is the error of a registration past an account's bound.
func tooManyWebhooks(account string, max int) error {
	return sandbox.Errorf(sandbox.KindForbidden, "account %s holds %d webhooks, the most it may", account, max)
}

func webhookNotFound(id string) error {
	return sandbox.Errorf(sandbox.KindNotFound, "webhook %s not found", id)
}
