package sandbox

import (
	"errors"
	"fmt"
)

// Kind is one of the stable error codes of the API. Each maps to one HTTP
// status in exactly one place (internal/service, Status).
type Kind string

const (
	KindInvalid           Kind = "invalid_request"
	KindUnauthorized      Kind = "unauthorized"
	KindForbidden         Kind = "forbidden"
	KindNotFound          Kind = "not_found"
	KindConflict          Kind = "conflict"
	KindLeaseEnded        Kind = "lease_ended"
	KindPayloadTooLarge   Kind = "payload_too_large"
	KindNotSupported      Kind = "not_supported"
	KindMaxCost           Kind = "max_cost_exceeded"
	KindSpendingLimit     Kind = "spending_limit_reached"
	KindTrialExhausted    Kind = "trial_exhausted"
	KindConcurrency       Kind = "concurrency_limit_reached"
	KindRateLimited       Kind = "rate_limited"
	KindCapacityExhausted Kind = "capacity_exhausted"
	KindInternal          Kind = "internal"
	// KindBadGateway: nothing answers on a sandbox's port (a preview URL
	// or a port forward).
	KindBadGateway Kind = "bad_gateway"
)

// Error is an error with a stable kind and a message fit for the client.
// The wrapped error, if any, keeps the internal detail for the log.
type Error struct {
	Kind    Kind
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Kind, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Is lets errors.Is(err, sandbox.ErrNotFound) match any error of that kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Err == nil && t.Kind == e.Kind
}

// Errorf makes an error of kind k with a client-facing message.
func Errorf(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// Wrap makes an error of kind k whose message is for the client and whose
// cause stays internal.
func Wrap(k Kind, err error, message string) error {
	return &Error{Kind: k, Message: message, Err: err}
}

// Sentinels for errors.Is.
var (
	ErrInvalid           = &Error{Kind: KindInvalid}
	ErrNotFound          = &Error{Kind: KindNotFound}
	ErrConflict          = &Error{Kind: KindConflict}
	ErrLeaseEnded        = &Error{Kind: KindLeaseEnded}
	ErrNotSupported      = &Error{Kind: KindNotSupported}
	ErrCapacityExhausted = &Error{Kind: KindCapacityExhausted}
)

// KindOf returns the kind of err, or KindInternal when it has none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// MessageOf returns the client-facing message of err. Errors without a kind
// never leak their text: the client reads a generic message.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
