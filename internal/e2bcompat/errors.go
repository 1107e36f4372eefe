package e2bcompat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/withruntime/withruntime/client"
)

// Error is an answer in E2B's terms: an HTTP status and a message.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// errorBody is E2B's error shape: code is the HTTP status again, which
// the clients parse before anything else.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeE2BError answers an E2B error (control plane, /files).
func writeE2BError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if status >= 500 && status != http.StatusServiceUnavailable {
		// The Python client retries 5xx, create included: only a 503
		// (no capacity, nothing made) is safe to retry.
		w.Header().Set("Should-Retry", "false")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(errorBody{Code: status, Message: msg})
}

// writeError answers err as an E2B error.
func writeError(w http.ResponseWriter, err error) {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Code == client.CodeConcurrencyLimitReached {
		w.Header().Set("Should-Retry", "false") // waiting a second frees nothing
	}
	writeE2BError(w, httpStatus(err), message(err))
}

// message is err's text for an E2B client.
func message(err error) string {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Message != "" {
		return apiErr.Message + " (" + apiErr.Code + ")"
	}
	return err.Error()
}

// codeStatus is the E2B HTTP status of each withruntime error code. Those
// E2B has no status for take the nearest one its clients know.
var codeStatus = map[string]int{
	client.CodeInvalidRequest:          http.StatusBadRequest,
	client.CodeUnauthorized:            http.StatusUnauthorized,
	client.CodeForbidden:               http.StatusForbidden,
	client.CodeNotFound:                http.StatusNotFound,
	client.CodeConflict:                http.StatusConflict,
	client.CodeLeaseEnded:              http.StatusNotFound, // E2B knows no ended sandbox: it is gone
	client.CodePayloadTooLarge:         http.StatusRequestEntityTooLarge,
	client.CodeNotSupported:            http.StatusBadRequest,
	client.CodeMaxCostExceeded:         http.StatusPaymentRequired,
	client.CodeSpendingLimitReached:    http.StatusPaymentRequired,
	client.CodeTrialExhausted:          http.StatusPaymentRequired,
	client.CodeConcurrencyLimitReached: http.StatusTooManyRequests,
	client.CodeRateLimited:             http.StatusTooManyRequests,
	client.CodeCapacityExhausted:       http.StatusServiceUnavailable,
	client.CodeInternal:                http.StatusInternalServerError,
	client.CodeUnavailable:             http.StatusBadGateway,
	client.CodeCanceled:                499,
}

// httpStatus is the E2B status of err.
func httpStatus(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		if s, ok := codeStatus[apiErr.Code]; ok {
			return s
		}
		if apiErr.Status >= 400 {
			return apiErr.Status
		}
	}
	return http.StatusInternalServerError
}

// codeConnect is the Connect code of each withruntime error code.
var codeConnect = map[string]connect.Code{
	client.CodeInvalidRequest:          connect.CodeInvalidArgument,
	client.CodeUnauthorized:            connect.CodeUnauthenticated,
	client.CodeForbidden:               connect.CodePermissionDenied,
	client.CodeNotFound:                connect.CodeNotFound,
	client.CodeConflict:                connect.CodeFailedPrecondition,
	client.CodeLeaseEnded:              connect.CodeUnavailable,
	client.CodePayloadTooLarge:         connect.CodeResourceExhausted,
	client.CodeNotSupported:            connect.CodeUnimplemented,
	client.CodeMaxCostExceeded:         connect.CodeResourceExhausted,
	client.CodeSpendingLimitReached:    connect.CodeResourceExhausted,
	client.CodeTrialExhausted:          connect.CodeResourceExhausted,
	client.CodeConcurrencyLimitReached: connect.CodeResourceExhausted,
	client.CodeRateLimited:             connect.CodeResourceExhausted,
	client.CodeCapacityExhausted:       connect.CodeUnavailable,
	client.CodeInternal:                connect.CodeInternal,
	client.CodeUnavailable:             connect.CodeUnavailable,
	client.CodeCanceled:                connect.CodeCanceled,
}

// statusConnect is the Connect code of an E2B status (Error).
var statusConnect = map[int]connect.Code{
	http.StatusBadRequest:          connect.CodeInvalidArgument,
	http.StatusUnauthorized:        connect.CodeUnauthenticated,
	http.StatusForbidden:           connect.CodePermissionDenied,
	http.StatusNotFound:            connect.CodeNotFound,
	http.StatusConflict:            connect.CodeAlreadyExists,
	http.StatusTooManyRequests:     connect.CodeResourceExhausted,
	http.StatusNotImplemented:      connect.CodeUnimplemented,
	http.StatusBadGateway:          connect.CodeUnavailable,
	http.StatusServiceUnavailable:  connect.CodeUnavailable,
	http.StatusInternalServerError: connect.CodeInternal,
}

// connectError is err as a Connect error (envd's RPCs). A deadline or a
// cancel, the caller's (Connect-Timeout-Ms) or the API's, keeps its own
// code: E2B's clients tell a timeout by deadline_exceeded.
func connectError(err error) *connect.Error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	code := connect.CodeInternal
	var e *Error
	var apiErr *client.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = connect.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = connect.CodeCanceled
	case errors.As(err, &e):
		if c, ok := statusConnect[e.Status]; ok {
			code = c
		}
	case errors.As(err, &apiErr):
		if c, ok := codeConnect[apiErr.Code]; ok {
			code = c
		}
	}
	return connect.NewError(code, messageError{msg: message(err), err: err})
}

// messageError is err with the text an E2B client is shown.
type messageError struct {
	msg string
	err error
}

func (m messageError) Error() string { return m.msg }
func (m messageError) Unwrap() error { return m.err }
