package service

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// statuses is the one mapping from error kinds to HTTP statuses; a kind
// not in it is not one a client is shown.
var statuses = map[sandbox.Kind]int{
	sandbox.KindInvalid:           http.StatusBadRequest,
	sandbox.KindUnauthorized:      http.StatusUnauthorized,
	sandbox.KindForbidden:         http.StatusForbidden,
	sandbox.KindNotFound:          http.StatusNotFound,
	sandbox.KindConflict:          http.StatusConflict,
	sandbox.KindLeaseEnded:        http.StatusConflict,
	sandbox.KindPayloadTooLarge:   http.StatusRequestEntityTooLarge,
	sandbox.KindNotSupported:      http.StatusUnprocessableEntity,
	sandbox.KindMaxCost:           http.StatusPaymentRequired,
	sandbox.KindSpendingLimit:     http.StatusPaymentRequired,
	sandbox.KindTrialExhausted:    http.StatusPaymentRequired,
	sandbox.KindConcurrency:       http.StatusTooManyRequests,
	sandbox.KindRateLimited:       http.StatusTooManyRequests,
	sandbox.KindCapacityExhausted: http.StatusServiceUnavailable,
	sandbox.KindInternal:          http.StatusInternalServerError,
	sandbox.KindBadGateway:        http.StatusBadGateway,
}

// Status is the HTTP status of an error kind; unknown kinds are internal.
func Status(k sandbox.Kind) int {
	if s, ok := statuses[k]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Kinds are the error kinds a client may be shown (the codes of the API's
// error envelope), sorted.
func Kinds() []sandbox.Kind {
	return slices.Sorted(maps.Keys(statuses))
}

// Public is what a client may read of err: its stable code and its
// client-facing message. Errors without a known kind never show their
// text: they are internal, "internal error".
func Public(err error) (sandbox.Kind, string) {
	k := sandbox.KindOf(err)
	msg := sandbox.MessageOf(err)
	if _, ok := statuses[k]; !ok {
		k, msg = sandbox.KindInternal, "internal error"
	}
	if msg == "" {
		msg = strings.ReplaceAll(string(k), "_", " ")
	}
	return k, msg
}
