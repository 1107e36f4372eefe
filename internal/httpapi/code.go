package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

const (
	// maxCwd bounds a context's cwd: a path longer than PATH_MAX names
	// nothing.
	maxCwd = 4096
	// maxContextEnv bounds the env entries of a request's own, counted
	// before the secrets' placeholders are added (the agent allows for
	// both).
	maxContextEnv = 256
)

// codeBody is a CodeRequest whose code field can be told missing from
// empty: code is required, and "" is a cell too.
type codeBody struct {
	api.CodeRequest
	Code *string `json:"code"`
}

// runCode checks a cell's request before the agent sees it, adds the
// placeholders of the account's secrets to the environment of a default
// context it may make, then forwards it. The agent answers with an ndjson
// stream of api.CodeEvent, passed on as it comes under codeStream's guard.
func (s *server) runCode(w http.ResponseWriter, r *http.Request, c caller) error {
	var b codeBody
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &b); err != nil {
		return err
	}
	if b.Code == nil {
		return sandbox.Errorf(sandbox.KindInvalid, `code is required (it may be "")`)
	}
	req := b.CodeRequest
	req.Code = *b.Code
	if req.ContextID != "" && !validContextID(req.ContextID) {
		return sandbox.Errorf(sandbox.KindInvalid, `context_id must be "default" or "ctx_" and 16 hex digits, not %q`, req.ContextID)
	}
	if err := checkLanguage(req.Language); err != nil {
		return err
	}
	if req.TimeoutMs < 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "timeout_ms must not be negative")
	}
	if err := checkContextEnv(req.Env); err != nil {
		return err
	}
	env, err := s.addPlaceholders(r.Context(), c.account, req.Env)
	if err != nil {
		return err
	}
	req.Env = env
	return s.forwardChecked(w, r, c, "/code", req)
}

// createContext checks a new context's request, adds the placeholders of
// the account's secrets to its environment, then forwards it.
func (s *server) createContext(w http.ResponseWriter, r *http.Request, c caller) error {
	var req api.CreateContextRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, true, &req); err != nil {
		return err
	}
	if err := checkLanguage(req.Language); err != nil {
		return err
	}
	if len(req.Cwd) > maxCwd {
		return sandbox.Errorf(sandbox.KindInvalid, "cwd is longer than %d bytes", maxCwd)
	}
	if err := checkContextEnv(req.Env); err != nil {
		return err
	}
	env, err := s.addPlaceholders(r.Context(), c.account, req.Env)
	if err != nil {
		return err
	}
	req.Env = env
	return s.forwardChecked(w, r, c, "/contexts", req)
}

// forwardChecked sends the agent req at agentPath: the body was read to
// check it, and the agent gets the checked value.
func (s *server) forwardChecked(w http.ResponseWriter, r *http.Request, c caller, agentPath string, req any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding the request for %s: %w", agentPath, err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	r.Header.Set("Content-Type", "application/json")
	return s.proxy(w, r, c, agentPath)
}

// checkLanguage allows the one language the kernels speak.
func checkLanguage(lang string) error {
	if lang != "" && lang != "python" {
		return sandbox.Errorf(sandbox.KindInvalid, `language must be "python" (or left out), not %q`, lang)
	}
	return nil
}

// checkContextEnv refuses names no environment can hold; decodeJSON
// already refused NUL bytes.
func checkContextEnv(env map[string]string) error {
	if len(env) > maxContextEnv {
		return sandbox.Errorf(sandbox.KindInvalid, "env has %d values, more than %d", len(env), maxContextEnv)
	}
	for k := range env {
		if k == "" || strings.IndexByte(k, '=') >= 0 {
			return sandbox.Errorf(sandbox.KindInvalid, "env name %q is not valid: it must be non-empty, without '='", k)
		}
	}
	return nil
}

// validContextID reports whether id has a context id's shape: "default",
// or "ctx_" and 16 lowercase hex digits.
func validContextID(id string) bool {
	if id == "default" {
		return true
	}
	hex, ok := strings.CutPrefix(id, "ctx_")
	if !ok || len(hex) != 16 {
		return false
	}
	for _, c := range []byte(hex) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
