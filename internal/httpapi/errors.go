package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// ErrorDetail is what the client reads of err: its stable code and its
// client-facing message (service.Public). Errors without a known kind
// never show their text.
func ErrorDetail(err error) api.ErrorDetail {
	k, msg := service.Public(err)
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
	writeJSON(w, service.Status(sandbox.Kind(d.Code)), api.ErrorBody{Error: d})
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
