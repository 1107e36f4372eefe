package agent

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strings"
)

// maxEnvBody bounds a PUT /env body: the host's largest environment (256
// values of 32 KiB, each byte a control character JSON writes as \u00XX:
// about 50 MB) fits, so that no create the API accepts fails here.
const maxEnvBody = 64 << 20

// envRequest is the body of PUT /env.
type envRequest struct {
	Env map[string]string `json:"env"`
}

// handleEnvPut sets the sandbox's own environment: a pool member boots
// before anyone asks for it, with no create request's env, so the host sets
// that env once it hands the sandbox out. The set replaces the one a
// previous PUT gave, over Config.BaseEnv, for every command started later.
func (s *Server) handleEnvPut(w http.ResponseWriter, r *http.Request) error {
	var req envRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxEnvBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return invalidf("bad JSON body: %v", err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return invalidf("bad JSON body: more than one value")
	}
	if req.Env == nil {
		return invalidf("env is missing")
	}
	if err := checkEnv(req.Env); err != nil {
		return err
	}
	s.setEnv(req.Env)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkEnv refuses what no process environment can hold: an empty name, a
// name with '=' or NUL, a value with NUL.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return invalidf("env name %q is not valid", k)
		}
		if err := checkNUL("env "+k, v); err != nil {
			return err
		}
	}
	return nil
}

// setEnv replaces the sandbox's own environment with a copy of env.
func (s *Server) setEnv(env map[string]string) {
	own := maps.Clone(env)
	s.envMu.Lock()
	s.ownEnv = own
	s.envMu.Unlock()
}

// sandboxEnv is the sandbox's own environment. The map is never written
// after setEnv stored it: a reader may range over it unlocked.
func (s *Server) sandboxEnv() map[string]string {
	s.envMu.RLock()
	defer s.envMu.RUnlock()
	return s.ownEnv
}

// withLocalBin puts $HOME/.local/bin first on m's PATH, as Debian's
// ~/.profile does for a login shell: `pip install --user` puts commands
// there, and an exec is no login shell. A PATH that already holds it stays.
func withLocalBin(m map[string]string) {
	home, path := m["HOME"], m["PATH"]
	if home == "" || path == "" {
		return
	}
	dir := strings.TrimSuffix(home, "/") + "/.local/bin"
	for _, p := range strings.Split(path, ":") {
		if p == dir {
			return
		}
	}
	m["PATH"] = dir + ":" + path
}
