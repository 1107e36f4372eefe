package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// statuses is the one mapping from error kinds to HTTP statuses.
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
}

// Status is the HTTP status of an error kind; unknown kinds are internal.
func Status(k sandbox.Kind) int {
	if s, ok := statuses[k]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorDetail is what the client reads of err: its stable code and its
// client-facing message. Errors without a known kind never show their text.
func ErrorDetail(err error) api.ErrorDetail {
	k := sandbox.KindOf(err)
	msg := sandbox.MessageOf(err)
	if _, ok := statuses[k]; !ok {
		k, msg = sandbox.KindInternal, "internal error"
	}
	if msg == "" {
		msg = strings.ReplaceAll(string(k), "_", " ")
	}
	return api.ErrorDetail{Code: string(k), Message: msg}
}

// writeError answers the request with err and keeps err's detail for the
// access log line.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	if info := infoFrom(r.Context()); info != nil {
		info.err = err
	}
	d := ErrorDetail(err)
	if d.Code == string(sandbox.KindUnauthorized) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="withruntime"`)
	}
	writeJSON(w, Status(sandbox.Kind(d.Code)), api.ErrorBody{Error: d})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// The status is sent; an encoding or write error can only mean the
	// client went away.
	_ = json.NewEncoder(w).Encode(v)
}
