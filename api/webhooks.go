package api

import "time"

// Webhook event types: what POST /v1/webhooks subscribes to and each
// delivery's "type".
const (
	EventSandboxCreated = "sandbox.created"
	EventSandboxPaused  = "sandbox.paused"
	EventSandboxResumed = "sandbox.resumed"
	EventSandboxEnded   = "sandbox.ended"
	EventTemplateBuilt  = "template.built"
)

// WebhookEvents are the event types, in the order the docs list them.
var WebhookEvents = []string{EventSandboxCreated, EventSandboxPaused, EventSandboxResumed, EventSandboxEnded, EventTemplateBuilt}

// MaxWebhooksPerAccount is how many webhooks an account may register.
const MaxWebhooksPerAccount = 20

// CreateWebhookRequest is the body of POST /v1/webhooks.
type CreateWebhookRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// Webhook is a registered webhook. Secret (whsec_...) is shown once, in
// the answer of its creation; Deliveries only in GET /v1/webhooks.
type Webhook struct {
	ID         string            `json:"id"`
	URL        string            `json:"url"`
	Events     []string          `json:"events"`
	Secret     string            `json:"secret,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	Deliveries []WebhookDelivery `json:"deliveries,omitempty"`
}

// WebhookDelivery is how one event's delivery ended.
type WebhookDelivery struct {
	// EventID is the delivery's webhook-id header (evt_ and the event's
	// sequence number).
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	// Subject is the id of the sandbox or template the event is about.
	Subject string `json:"subject"`
	// Status is delivered or failed (after every try).
	Status   string    `json:"status"`
	Attempts int       `json:"attempts"`
	HTTPCode int       `json:"http_code,omitempty"`
	Error    string    `json:"error,omitempty"`
	At       time.Time `json:"at"`
}

// WebhookList is the body of GET /v1/webhooks.
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks"`
}

// AuditEntry is one change made through the API.
type AuditEntry struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Account string    `json:"account"`
	KeyID   string    `json:"key_id"`
	// Action is what was done (sandbox.create, key.revoke, ...).
	Action string `json:"action"`
	// Target is the id or name of what it was done to.
	Target string `json:"target,omitempty"`
	// Remote is the client's address.
	Remote string `json:"remote,omitempty"`
}

// AuditLog is the body of GET /v1/audit.
type AuditLog struct {
	Entries []AuditEntry `json:"entries"`
}
