package e2bcompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
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

// tooLargeHeader marks a unary Connect error that is a payload_too_large,
// from markTooLarge to connectStatus; it never leaves the server.
const tooLargeHeader = "Withruntime-Payload-Too-Large"

// isTooLarge says whether err is a payload_too_large, the API's or this
// layer's own.
func isTooLarge(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status == http.StatusRequestEntityTooLarge
	}
	var apiErr *client.APIError
	return errors.As(err, &apiErr) && apiErr.Code == client.CodePayloadTooLarge
}

// markTooLarge marks a unary RPC's payload_too_large for connectStatus:
// Connect has one code, resource_exhausted, for it and for a rate limit,
// and answers both 429.
func markTooLarge(err error) error {
	var ce *connect.Error
	if isTooLarge(err) && errors.As(err, &ce) {
		ce.Meta().Set(tooLargeHeader, "1")
	}
	return err
}

// connectStatus gives a unary Connect RPC's payload_too_large the status
// 413, not the 429 Connect answers for resource_exhausted (what a rate
// limit answers, which clients wait and retry): a request message over
// max, refused here before Connect reads it (Connect's own bound would
// read the rest of the body to throw it away), and an error markTooLarge
// marked. The body keeps Connect's shape and code, resource_exhausted,
// which Connect clients (E2B's too) read before the status; the message
// says payload_too_large. Streaming and gRPC calls are passed on as they
// are: their protocols carry the code in the stream or the trailers, under
// a 200.
func connectStatus(h http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !connectUnary(r) {
			h.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > max {
			writeConnectTooLarge(w, max)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
		if int64(len(body)) > max {
			writeConnectTooLarge(w, max)
			return
		}
		var rest io.Reader = bytes.NewReader(body)
		if err != nil {
			rest = io.MultiReader(rest, errReader{err})
		}
		r.Body = io.NopCloser(rest)
		h.ServeHTTP(&tooLargeWriter{ResponseWriter: w}, r)
	})
}

// connectUnary says whether r is a unary call in the Connect protocol:
// a POST of JSON or protobuf, not enveloped.
func connectUnary(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && (mt == "application/json" || mt == "application/proto")
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func writeConnectTooLarge(w http.ResponseWriter, max int64) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	json.NewEncoder(w).Encode(map[string]string{
		"code":    connect.CodeResourceExhausted.String(),
		"message": fmt.Sprintf("the request message is larger than %d bytes (%s)", max, client.CodePayloadTooLarge),
	})
}

// tooLargeWriter turns the 429 of an error markTooLarge marked into 413,
// and drops the mark.
type tooLargeWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *tooLargeWriter) WriteHeader(status int) {
	if !t.wrote {
		t.wrote = true
		h := t.Header()
		if h.Get(tooLargeHeader) != "" && status == http.StatusTooManyRequests {
			status = http.StatusRequestEntityTooLarge
		}
		h.Del(tooLargeHeader)
	}
	t.ResponseWriter.WriteHeader(status)
}

func (t *tooLargeWriter) Write(b []byte) (int, error) {
	if !t.wrote {
		t.WriteHeader(http.StatusOK)
	}
	return t.ResponseWriter.Write(b)
}

func (t *tooLargeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
