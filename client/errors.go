package client

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/withruntime/withruntime/api"
)

// The stable error codes of the API (SPEC.md, "Stable names").
const (
	CodeInvalidRequest          = "invalid_request"
	CodeUnauthorized            = "unauthorized"
	CodeForbidden               = "forbidden"
	CodeNotFound                = "not_found"
	CodeConflict                = "conflict"
	CodeLeaseEnded              = "lease_ended"
	CodePayloadTooLarge         = "payload_too_large"
	CodeNotSupported            = "not_supported"
	CodeMaxCostExceeded         = "max_cost_exceeded"
	CodeSpendingLimitReached    = "spending_limit_reached"
	CodeTrialExhausted          = "trial_exhausted"
	CodeConcurrencyLimitReached = "concurrency_limit_reached"
	CodeRateLimited             = "rate_limited"
	CodeCapacityExhausted       = "capacity_exhausted"
	CodeInternal                = "internal"
	// CodeBadGateway: nothing answers on a sandbox's port (a preview URL
	// or a port forward).
	CodeBadGateway = "bad_gateway"
)

// The client-side codes (SPEC.md): never in a server's answer, they name
// what went wrong on the way to it.
const (
	// CodeUnavailable: the server could not be reached, or a stream broke
	// (a *TransportError).
	CodeUnavailable = "unavailable"
	// CodeCanceled: the caller interrupted the call.
	CodeCanceled = "canceled"
)

// Sentinels for errors.Is: each matches any *APIError with its code.
var (
	ErrInvalidRequest          = &APIError{Code: CodeInvalidRequest}
	ErrUnauthorized            = &APIError{Code: CodeUnauthorized}
	ErrForbidden               = &APIError{Code: CodeForbidden}
	ErrNotFound                = &APIError{Code: CodeNotFound}
	ErrConflict                = &APIError{Code: CodeConflict}
	ErrLeaseEnded              = &APIError{Code: CodeLeaseEnded}
	ErrPayloadTooLarge         = &APIError{Code: CodePayloadTooLarge}
	ErrNotSupported            = &APIError{Code: CodeNotSupported}
	ErrMaxCostExceeded         = &APIError{Code: CodeMaxCostExceeded}
	ErrSpendingLimitReached    = &APIError{Code: CodeSpendingLimitReached}
	ErrTrialExhausted          = &APIError{Code: CodeTrialExhausted}
	ErrConcurrencyLimitReached = &APIError{Code: CodeConcurrencyLimitReached}
	ErrRateLimited             = &APIError{Code: CodeRateLimited}
	ErrCapacityExhausted       = &APIError{Code: CodeCapacityExhausted}
	ErrInternal                = &APIError{Code: CodeInternal}
)

// ErrUnsafePath is returned by DownloadDir for an archive entry that would
// land outside the target directory: a name with "..", an absolute name, or
// one that passes through a symbolic link.
var ErrUnsafePath = errors.New("unsafe path in archive")

// APIError is what the server refused: an HTTP error status, or an "error"
// event inside an exec stream (Status is then the code's usual status).
type APIError struct {
	Code    string // one of the Code* constants, or a newer one
	Status  int    // HTTP status
	Message string // for people
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Is makes errors.Is(err, ErrNotFound) match any APIError of that code.
func (e *APIError) Is(target error) bool {
	t, ok := target.(*APIError)
	return ok && t.Status == 0 && t.Message == "" && t.Code == e.Code
}

// TransportError says the server could not be reached, or a stream broke
// before its end (for an exec, before the "exit" event). Whether the
// request took effect is unknown.
type TransportError struct {
	Op  string // "METHOD URL"
	Err error
}

func (e *TransportError) Error() string {
	msg := e.Op + ": " + e.Err.Error()
	if errors.Is(e.Err, syscall.ECONNREFUSED) {
		// Nothing listens there: say how to get a server.
		msg += " (no server answers there: start one with `withruntime serve`, or leave WITHRUNTIME_BASE_URL unset and run any CLI command, such as `withruntime sandbox ls`, to start the local daemon)"
	}
	return msg
}

func (e *TransportError) Unwrap() error { return e.Err }

// codeStatus is each code's HTTP status.
var codeStatus = map[string]int{
	CodeInvalidRequest:          http.StatusBadRequest,
	CodeUnauthorized:            http.StatusUnauthorized,
	CodeForbidden:               http.StatusForbidden,
	CodeNotFound:                http.StatusNotFound,
	CodeConflict:                http.StatusConflict,
	CodeLeaseEnded:              http.StatusConflict,
	CodePayloadTooLarge:         http.StatusRequestEntityTooLarge,
	CodeNotSupported:            http.StatusUnprocessableEntity,
	CodeMaxCostExceeded:         http.StatusPaymentRequired,
	CodeSpendingLimitReached:    http.StatusPaymentRequired,
	CodeTrialExhausted:          http.StatusPaymentRequired,
	CodeConcurrencyLimitReached: http.StatusTooManyRequests,
	CodeRateLimited:             http.StatusTooManyRequests,
	CodeCapacityExhausted:       http.StatusServiceUnavailable,
	CodeInternal:                http.StatusInternalServerError,
}

// statusCode is the code given to an error answer that carries none (a
// proxy's page, say). Where a status has several codes, the most general.
var statusCode = map[int]string{
	http.StatusBadRequest:            CodeInvalidRequest,
	http.StatusUnauthorized:          CodeUnauthorized,
	http.StatusPaymentRequired:       CodeSpendingLimitReached,
	http.StatusForbidden:             CodeForbidden,
	http.StatusNotFound:              CodeNotFound,
	http.StatusConflict:              CodeConflict,
	http.StatusRequestEntityTooLarge: CodePayloadTooLarge,
	http.StatusUnprocessableEntity:   CodeNotSupported,
	http.StatusTooManyRequests:       CodeRateLimited,
	http.StatusServiceUnavailable:    CodeCapacityExhausted,
}

// codeForStatus derives a code from an HTTP status alone.
func codeForStatus(status int) string {
	if c, ok := statusCode[status]; ok {
		return c
	}
	if status >= 400 && status < 500 {
		return CodeInvalidRequest
	}
	return CodeInternal
}

// statusForCode is the usual status of code, for errors that arrive without
// one (inside an exec stream).
func statusForCode(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// readAPIError turns an error answer into an *APIError. A body that is not
// the API's JSON still gives a code (from the status) and a message (its
// first line or the status text).
func readAPIError(resp *http.Response) *APIError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &APIError{Status: resp.StatusCode}
	var body api.ErrorBody
	if json.Unmarshal(b, &body) == nil {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	}
	if e.Code == "" {
		e.Code = codeForStatus(resp.StatusCode)
	}
	if e.Message == "" {
		e.Message = textMessage(b)
	}
	if e.Message == "" {
		e.Message = strings.ToLower(http.StatusText(resp.StatusCode))
	}
	return e
}

// textMessage returns the first line of a plain-text body, short, or "" when
// it is not readable text.
func textMessage(b []byte) string {
	if !utf8.Valid(b) {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, "<") { // an HTML page says nothing useful in one line
		return ""
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	const max = 200
	if len(s) > max {
		s = s[:max]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "..."
	}
	return s
}

// apiErrorFromEvent turns an exec stream's "error" event into an *APIError.
func apiErrorFromEvent(d *api.ErrorDetail) *APIError {
	if d == nil || d.Code == "" {
		msg := "exec stream reported an error without a code"
		if d != nil && d.Message != "" {
			msg = d.Message
		}
		return &APIError{Code: CodeInternal, Status: http.StatusInternalServerError, Message: msg}
	}
	return &APIError{Code: d.Code, Status: statusForCode(d.Code), Message: d.Message}
}
