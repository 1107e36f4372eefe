package httpapi

import (
	"net/http"

	"github.com/withruntime/withruntime/api"
)

// getNetwork answers the sandbox's egress policy.
func (s *server) getNetwork(w http.ResponseWriter, r *http.Request, c caller) error {
	rec, err := s.cfg.Sandboxes.Get(r.Context(), c.account, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NetworkView(rec.Spec.Network))
	return nil
}

// setNetwork replaces the sandbox's egress policy; the manager checks it.
func (s *server) setNetwork(w http.ResponseWriter, r *http.Request, c caller) error {
	var n api.Network
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &n); err != nil {
		return err
	}
	rec, err := s.cfg.Sandboxes.SetNetwork(r.Context(), c.account, r.PathValue("id"), networkOf(n))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SandboxView(rec))
	return nil
}

// egressLog answers the sandbox's allowed and refused connections.
func (s *server) egressLog(w http.ResponseWriter, r *http.Request, c caller) error {
	events, err := s.cfg.Sandboxes.Egress(r.Context(), c.account, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.EgressLog{Events: egressView(events)})
	return nil
}
