package e2bcompat

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/withruntime/withruntime/client"
)

// The control plane: E2B's REST routes (e2b-protocol §1), each one or two
// calls to withruntime's own API with the caller's key.

// EnvdVersion is the envd version sandboxes report: clients switch
// features on by it (0.6.4: watches of network mounts, which polled
// listings see like any other; 0.6.3: entry info in watch events; 0.6.2:
// file metadata; 0.5.7: streamed uploads; below 0.4.0 they would name the
// user on every call).
const EnvdVersion = "0.6.4"

// clientID is what E2B calls the node a sandbox runs on: the clients
// require it and use it for nothing.
const clientID = "withruntime"

// defaultTimeout is E2B's lease when a create or connect names none.
const defaultTimeout = 300

// maxControlBody bounds a control-plane request body.
const maxControlBody = 1 << 20

func init() {
	controlRoutes = append(controlRoutes, func(s *Server, mux *http.ServeMux) {
		for _, prefix := range []string{"/v2", ""} {
			mux.HandleFunc("POST "+prefix+"/sandboxes", s.withKey(s.create))
			mux.HandleFunc("GET "+prefix+"/sandboxes", s.withKey(s.list))
			mux.HandleFunc("POST "+prefix+"/sandboxes/{id}/connect", s.withKey(s.connect))
		}
		mux.HandleFunc("POST /sandboxes/{id}/resume", s.withKey(s.connect))
		mux.HandleFunc("GET /sandboxes/{id}", s.withKey(s.detail))
		mux.HandleFunc("DELETE /sandboxes/{id}", s.withKey(s.kill))
		mux.HandleFunc("POST /sandboxes/{id}/timeout", s.withKey(s.setTimeout))
		mux.HandleFunc("POST /sandboxes/{id}/refreshes", s.withKey(s.refresh))
		mux.HandleFunc("POST /sandboxes/{id}/pause", s.withKey(s.pause))
		mux.HandleFunc("PUT /sandboxes/{id}/network", s.withKey(s.updateNetwork))
		mux.HandleFunc("GET /sandboxes/{id}/metrics", s.withKey(s.sandboxMetrics))
		for pattern, feature := range unsupportedRoutes {
			mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
				writeE2BError(w, http.StatusNotImplemented, feature+" is not supported by withruntime's E2B API")
			})
		}
	})
}

// templateAPIPart is the template routes withruntime does not serve.
const templateAPIPart = "this part of E2B's template API (withruntime serves the builder's calls and the alias check)"

// unsupportedRoutes are E2B features withruntime does not offer, by route.
var unsupportedRoutes = map[string]string{
	"/snapshots/":                    "snapshots",
	"/templates":                     templateAPIPart,
	"/templates/":                    templateAPIPart,
	"/v2/templates":                  templateAPIPart,
	"/v2/templates/":                 templateAPIPart,
	"/v3/templates":                  templateAPIPart,
	"/v3/templates/":                 templateAPIPart,
	"/secrets":                       "E2B's secrets API (use withruntime's: withruntime secret set)",
	"/secrets/":                      "E2B's secrets API (use withruntime's: withruntime secret set)",
	"/sandboxes/{id}/mcp":            "the MCP gateway",
	"GET /v2/sandboxes/{id}/metrics": "sandbox metrics",
	"GET /sandboxes/metrics":         "sandbox metrics",
	"GET /sandboxes/{id}/logs":       "sandbox logs",
	"GET /v2/sandboxes/{id}/logs":    "sandbox logs",
}

// controlHandler is a control-plane handler: c acts with the caller's key.
type controlHandler func(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error

// withKey checks the caller's key is there and answers a handler's error
// in E2B's shape. What the key may do, the API decides on each call; a
// request with a body has its key checked by the API first, so that no
// body is read for a caller the API does not know.
func (s *Server) withKey(h controlHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := apiKey(r.Header.Get("X-API-KEY"))
		if key == "" {
			if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
				key = apiKey(tok)
			}
		}
		if key == "" {
			writeE2BError(w, http.StatusUnauthorized, "missing API key: set E2B_API_KEY to a withruntime key")
			return
		}
		c := s.client(key)
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			if err := checkKey(r.Context(), c); err != nil {
				writeError(w, err)
				return
			}
		}
		if err := h(w, r, c, key); err != nil {
			writeError(w, err)
		}
	}
}

// checkKey has the API check c's key with its cheapest call for any key:
// a one-sandbox page of its running sandboxes.
func checkKey(ctx context.Context, c *client.Client) error {
	_, err := c.ListSandboxesPage(ctx, client.ListOptions{States: []string{"running"}, Limit: 1})
	return err
}

// decodeBody reads a JSON body into v; an empty body leaves v as it is.
// Unknown fields are ignored: newer clients send more, and what they send
// that withruntime cannot honour is refused by name where it is read.
func decodeBody(r *http.Request, v any) error {
	return decodeBodyMax(r, v, maxControlBody)
}

// decodeBodyMax is decodeBody with a bound of max bytes.
func decodeBodyMax(r *http.Request, v any, max int64) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, max))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &Error{Status: http.StatusRequestEntityTooLarge, Message: "request body is too large"}
		}
		return &Error{Status: http.StatusBadRequest, Message: "reading the request body: " + err.Error()}
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: "request body: " + err.Error()}
	}
	return nil
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// unsupported is the 400 of an option withruntime does not offer.
func unsupported(what string) error {
	return &Error{Status: http.StatusBadRequest, Message: what + " is not supported by withruntime's E2B API"}
}
