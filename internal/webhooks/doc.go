// Package webhooks delivers the lifecycle events of internal/store's event
// log to the URLs accounts register (POST /v1/webhooks), signed the
// Standard Webhooks way, and records those events as they happen.
//
//   - Source is the store's event source: every sandbox state change and
//     every template insert appends an event (sandbox.created,
//     sandbox.paused, sandbox.resumed, sandbox.ended, template.built) in
//     the transaction of the write that made it, so neither commits
//     without the other.
//   - Worker delivers each webhook's events in the log's order (so in order
//     per sandbox), at least once: a delivery is retried with exponential
//     backoff and jitter up to Config.MaxAttempts, then logged as failed,
//     and the webhook's cursor in the store moves past it only then. A
//     restart resumes from the cursor, so none is lost.
//   - Checker holds a webhook's URL to what egress allows: never a
//     loopback, link-local, metadata, private, CGNAT, unspecified or
//     multicast address unless the operator permits it (serve
//     --webhook-permit CIDR), checked when the webhook is registered and
//     again at each delivery's dial, on the address dialled (a name that
//     resolves elsewhere later gains nothing).
//   - Sign and Verify are the Standard Webhooks scheme: headers
//     webhook-id, webhook-timestamp and webhook-signature "v1,<base64 of
//     HMAC-SHA256(key, id.timestamp.body)>", the key being the base64 after
//     "whsec_" of the webhook's secret.
package webhooks

// Event types: the names are part of the wire contract.
const (
	SandboxCreated = "sandbox.created"
	SandboxPaused  = "sandbox.paused"
	SandboxResumed = "sandbox.resumed"
	SandboxEnded   = "sandbox.ended"
	TemplateBuilt  = "template.built"
)

// Types are every event type, in the order the docs list them.
var Types = []string{SandboxCreated, SandboxPaused, SandboxResumed, SandboxEnded, TemplateBuilt}

// KnownType reports whether t is an event type.
func KnownType(t string) bool {
	for _, k := range Types {
		if k == t {
			return true
		}
	}
	return false
}
