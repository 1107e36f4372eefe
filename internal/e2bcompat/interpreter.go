package e2bcompat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// The code interpreter (port 49999): /execute and /contexts over
// withruntime's run_code and contexts. Its errors are plain text, as the
// interpreter clients read them: 404 (NotFound, the text as message), 502
// (the sandbox is gone) and others (the status and text).

func init() {
	interpreterRoutes = append(interpreterRoutes, func(s *Server, mux *http.ServeMux) {
		mux.HandleFunc("POST /execute", s.execute)
		mux.HandleFunc("POST /contexts", s.createContext)
		mux.HandleFunc("GET /contexts", s.listContexts)
		mux.HandleFunc("DELETE /contexts/{id}", s.removeContext)
		mux.HandleFunc("POST /contexts/{id}/restart", s.restartContext)
	})
}

// defaultContextID is withruntime's context for cells naming none.
const defaultContextID = "default"

// maxInterpreterBody bounds a request read here: the API's own bound on a
// JSON body (httpapi.DefaultMaxBodyBytes), which a cell forwarded in it
// could not pass anyway.
const maxInterpreterBody = 1 << 20

// e2bContext is E2B's Context: the Python client needs all three fields.
type e2bContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

type createContextBody struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func codeContextOf(c api.CodeContext) e2bContext {
	cwd := c.Cwd
	if c.ID == defaultContextID {
		// prepareDefault moved it there; the API records where it began.
		cwd = e2bHome
	}
	lang := c.Language
	if lang == "" {
		lang = "python"
	}
	return e2bContext{ID: c.ID, Language: lang, Cwd: cwd}
}

// checkCodeLanguage accepts Python, the only kernel withruntime has. The
// refusal is a 404 because that is the status whose text both
// interpreter clients show as the message.
func checkCodeLanguage(lang string) error {
	switch strings.ToLower(lang) {
	case "", "python", "python3":
		return nil
	}
	return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf(
		"no kernel for language %.40q: withruntime's code interpreter runs Python only", lang)}
}

// checkCodeContextID refuses an id withruntime never makes as not found
// (E2B's answer for an unknown context) rather than as invalid.
func checkCodeContextID(id string) error {
	if id == defaultContextID {
		return nil
	}
	hex, ok := strings.CutPrefix(id, "ctx_")
	if ok && len(hex) == 16 && strings.Trim(hex, "0123456789abcdef") == "" {
		return nil
	}
	return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no code context %.80q", id)}
}

// codeContextCwd is the cwd a new context asks for: E2B's home when none,
// relative ones under it (E2B's relative paths are the user's home's).
func codeContextCwd(cwd string) string {
	switch {
	case cwd == "":
		return e2bHome
	case path.IsAbs(cwd):
		return cwd
	}
	return path.Join(e2bHome, cwd)
}

func (s *Server) createContext(w http.ResponseWriter, r *http.Request) {
	sbx, err := s.sandbox(r)
	if err != nil {
		s.interpreterError(w, r, nil, err)
		return
	}
	var b createContextBody
	if err := readCodeJSON(r, &b); err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	if err := checkCodeLanguage(b.Language); err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	c, err := sbx.C.CreateContext(r.Context(), sbx.ID, api.CreateContextRequest{Cwd: codeContextCwd(b.Cwd), Language: "python"})
	if err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	writeCodeJSON(w, http.StatusOK, codeContextOf(*c))
}

func (s *Server) listContexts(w http.ResponseWriter, r *http.Request) {
	sbx, err := s.sandbox(r)
	if err != nil {
		s.interpreterError(w, r, nil, err)
		return
	}
	l, err := sbx.C.ListContexts(r.Context(), sbx.ID)
	if err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	out := make([]e2bContext, 0, len(l))
	for _, c := range l {
		out = append(out, codeContextOf(c))
	}
	writeCodeJSON(w, http.StatusOK, out)
}

func (s *Server) removeContext(w http.ResponseWriter, r *http.Request) {
	sbx, err := s.sandbox(r)
	if err != nil {
		s.interpreterError(w, r, nil, err)
		return
	}
	id := contextIDOf(r)
	if err := checkCodeContextID(id); err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	if err := sbx.C.RemoveContext(r.Context(), sbx.ID, id); err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) restartContext(w http.ResponseWriter, r *http.Request) {
	sbx, err := s.sandbox(r)
	if err != nil {
		s.interpreterError(w, r, nil, err)
		return
	}
	id := contextIDOf(r)
	if err := checkCodeContextID(id); err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	if _, err := sbx.C.RestartContext(r.Context(), sbx.ID, id); err != nil {
		s.interpreterError(w, r, sbx, err)
		return
	}
	if id == defaultContextID {
		// The new kernel starts where the API recorded, /workspace.
		if err := chdirHome(r.Context(), sbx, id); err != nil {
			s.interpreterError(w, r, sbx, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// contextIDOf is the {id} of /contexts/{id}[/restart]. Read from the path
// itself: a handler ServeHTTP calls through mux.Handler has no path values.
func contextIDOf(r *http.Request) string {
	if id := r.PathValue("id"); id != "" {
		return id
	}
	id := strings.TrimPrefix(r.URL.Path, "/contexts/")
	return strings.TrimSuffix(id, "/restart")
}

func readCodeJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxInterpreterBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the body is over %d bytes", maxInterpreterBody)}
		}
		return &Error{Status: http.StatusBadRequest, Message: "reading the body: " + err.Error()}
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil // JS sends no body where it has nothing to say
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: "the body is not the JSON expected: " + err.Error()}
	}
	return nil
}

func writeCodeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// interpreterError answers err before any of the body is written, as
// text. An error that may mean the sandbox ended under the call becomes
// the 502 of a gone sandbox once the sandbox is seen not to run (sbx is
// nil when the sandbox itself could not be resolved: err says why).
func (s *Server) interpreterError(w http.ResponseWriter, r *http.Request, sbx *Sandbox, err error) {
	if sbx != nil && codeMayBeGone(err) && codeSandboxGone(r.Context(), sbx) {
		err = errNotFound(sbx.ID)
	}
	status := httpStatus(err)
	if status == http.StatusBadGateway {
		writeError(w, err) // E2B's JSON, as the sandbox-side guard answers
		return
	}
	if status >= 500 {
		s.log.Warn("e2b interpreter", "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, message(err))
}

// codeMayBeGone says whether err can come from a sandbox that stopped
// running under the call.
func codeMayBeGone(err error) bool {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.Code {
		case client.CodeNotFound, client.CodeConflict, client.CodeLeaseEnded:
			return true
		}
		return false
	}
	var tErr *client.TransportError
	return errors.As(err, &tErr)
}

// codeSandboxGone says whether sbx no longer runs, asked apart from the
// request's context (which may be what ended).
func codeSandboxGone(ctx context.Context, sbx *Sandbox) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), helperTimeout/4)
	defer cancel()
	info, err := sbx.C.GetSandbox(ctx, sbx.ID)
	if err != nil {
		var apiErr *client.APIError
		return errors.As(err, &apiErr) && (apiErr.Code == client.CodeNotFound || apiErr.Code == client.CodeLeaseEnded)
	}
	return info.State != "running"
}
