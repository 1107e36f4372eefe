package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"syscall"

	"github.com/withruntime/withruntime/api"
)

// The stable error codes the agent answers with; the server passes them on.
const (
	codeInvalid  = "invalid_request"
	codeNotFound = "not_found"
	codeConflict = "conflict"
	codeTooLarge = "payload_too_large"
	codeDenied   = "forbidden"
	codeInternal = "internal"
	// codeUnsupported: the sandbox cannot do what was asked (a
	// filesystem without extended attributes).
	codeUnsupported = "not_supported"
	// codeBadGateway: nothing answers on a sandbox's port.
	codeBadGateway = "bad_gateway"
)

var statusOf = map[string]int{
	codeInvalid:     http.StatusBadRequest,
	codeNotFound:    http.StatusNotFound,
	codeConflict:    http.StatusConflict,
	codeTooLarge:    http.StatusRequestEntityTooLarge,
	codeDenied:      http.StatusForbidden,
	codeInternal:    http.StatusInternalServerError,
	codeUnsupported: http.StatusUnprocessableEntity,
	codeBadGateway:  http.StatusBadGateway,
}

// reqError is an error with a stable code and a message fit for the client.
type reqError struct {
	code string
	msg  string
}

func (e *reqError) Error() string { return e.msg }

func invalidf(format string, a ...any) error {
	return &reqError{codeInvalid, fmt.Sprintf(format, a...)}
}

func notFoundf(format string, a ...any) error {
	return &reqError{codeNotFound, fmt.Sprintf(format, a...)}
}

func unsupportedf(format string, a ...any) error {
	return &reqError{codeUnsupported, fmt.Sprintf(format, a...)}
}

func conflictf(format string, a ...any) error {
	return &reqError{codeConflict, fmt.Sprintf(format, a...)}
}

// classify is the one place an error becomes a status and a stable code.
func classify(err error) (int, api.ErrorDetail) {
	var re *reqError
	var tooBig *http.MaxBytesError
	code := codeInternal
	switch {
	case errors.As(err, &re):
		code = re.code
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, api.ErrorDetail{
			Code:    codeTooLarge,
			Message: fmt.Sprintf("body is larger than %d bytes", tooBig.Limit),
		}
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		code = codeNotFound
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EISDIR):
		code = codeConflict
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		// The sandbox's own kernel refused (a read-only or special file
		// system): the request was understood and is not allowed there.
		code = codeDenied
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		code = codeTooLarge
	}
	return statusOf[code], api.ErrorDetail{Code: code, Message: message(err)}
}

// message drops the syscall name from path errors: "lstat /x: ..." tells a
// client nothing that "/x: ..." does not.
func message(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Error() == err.Error() {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

func writeError(w http.ResponseWriter, err error) {
	status, detail := classify(err)
	writeJSON(w, status, api.ErrorBody{Error: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeJSON reads exactly one JSON value with no unknown fields.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, api.MaxFileBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return invalidf("bad JSON body: %v", err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return invalidf("bad JSON body: more than one value")
	}
	return nil
}

func checkNUL(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return invalidf("%s contains a NUL byte", field)
	}
	return nil
}
