package agent

import (
	"net/http"

	"github.com/withruntime/withruntime/api"
)

const (
	// maxCodeEnv bounds a context's own environment: the host allows 256
	// entries of the request's own and adds the placeholders of up to 100
	// secrets to them. maxEnvString is Linux's bound on one NAME=value
	// string of a new process.
	maxCodeEnv   = 512
	maxEnvString = 128 << 10
)

// codeBody is the body of POST /code: Code is a pointer here only to tell
// a missing code from an empty one.
type codeBody struct {
	api.CodeRequest
	Code *string `json:"code"`
}

func (s *Server) handleCode(w http.ResponseWriter, r *http.Request) error {
	var body codeBody
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	req := body.CodeRequest
	if body.Code == nil {
		return invalidf("code is missing")
	}
	req.Code = *body.Code
	if err := checkLanguage(req.Language); err != nil {
		return err
	}
	if req.TimeoutMs < 0 {
		return invalidf("timeout_ms must not be negative")
	}
	if err := checkCodeEnv(req.Env); err != nil {
		return err
	}
	id := req.ContextID
	if id == "" {
		id = defaultContext
	}
	cx, err := s.lookupContext(id, func() (*codeContext, error) {
		dir, err := s.workdir("")
		if err != nil {
			return nil, err
		}
		return s.addContext(defaultContext, dir, req.Env)
	})
	if err != nil {
		return err
	}
	// One cell at a time: the next waits here, as long as its client does.
	select {
	case cx.turn <- struct{}{}:
	case <-r.Context().Done():
		return nil
	}
	defer func() { <-cx.turn }()
	return s.runCell(w, r, cx, req)
}

func (s *Server) handleContextCreate(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateContextRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := checkLanguage(req.Language); err != nil {
		return err
	}
	if err := checkNUL("cwd", req.Cwd); err != nil {
		return err
	}
	if err := checkCodeEnv(req.Env); err != nil {
		return err
	}
	dir, err := s.workdir(req.Cwd)
	if err != nil {
		return err
	}
	if err := s.checkContextCwd(dir); err != nil {
		return err
	}
	cx, err := s.addContext("", dir, req.Env)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, cx.info())
	return nil
}

func (s *Server) handleContextList(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, api.CodeContextList{Contexts: s.listContexts()})
	return nil
}

func (s *Server) handleContextRestart(w http.ResponseWriter, r *http.Request) error {
	cx, err := s.lookupContext(r.PathValue("cid"), nil)
	if err != nil {
		return err
	}
	if err := s.restart(cx, "the context was restarted while the cell ran: its state was lost"); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cx.info())
	return nil
}

func (s *Server) handleContextRemove(w http.ResponseWriter, r *http.Request) error {
	if err := s.removeContext(r.PathValue("cid")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func checkLanguage(l string) error {
	if l != "" && l != language {
		return invalidf("language must be %q, not %.40q", language, l)
	}
	return nil
}

// checkCodeEnv is checkEnv with bounds: a context's env lives as long as
// its kernel.
func checkCodeEnv(env map[string]string) error {
	if len(env) > maxCodeEnv {
		return invalidf("env has %d values, more than %d", len(env), maxCodeEnv)
	}
	for k, v := range env {
		if len(k)+1+len(v) > maxEnvString {
			return invalidf("env %.40q is longer than %d bytes", k, maxEnvString)
		}
	}
	return checkEnv(env)
}
