package node

import (
	"net/http"

	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// snapshots is the node's manager's snapshot service: a node whose
// manager has none answers not_supported.
func (s *rpc) snapshots() (service.Snapshots, error) {
	if s.cfg.State.Fenced() {
		return nil, errFenced
	}
	ss, ok := s.cfg.Sandboxes.(service.Snapshots)
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindNotSupported, "node %s takes no snapshots", s.cfg.Node)
	}
	return ss, nil
}

func (s *rpc) snapshot(w http.ResponseWriter, r *http.Request) error {
	var req noderpc.SnapshotRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	ss, err := s.snapshots()
	if err != nil {
		return err
	}
	sn, err := ss.Snapshot(r.Context(), req.Account, r.PathValue("id"), req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sn)
	return nil
}

func (s *rpc) fork(w http.ResponseWriter, r *http.Request) error {
	var req noderpc.ForkRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	ss, err := s.snapshots()
	if err != nil {
		return err
	}
	sn, recs, err := ss.Fork(r.Context(), req.Account, req.KeyID, r.PathValue("id"), req.Count, req.Keep)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, noderpc.ForkResult{Snapshot: sn, Sandboxes: recs})
	return nil
}

func (s *rpc) deleteSnapshot(w http.ResponseWriter, r *http.Request) error {
	ss, err := s.snapshots()
	if err != nil {
		return err
	}
	if err := ss.DeleteSnapshot(r.Context(), r.URL.Query().Get("account"), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
