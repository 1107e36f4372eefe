package e2bcompat

import (
	"net/http"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// E2B's snapshots and forks (e2b-protocol §1): a snapshot is a sandbox
// saved whole, memory and processes included, which E2B's clients then
// treat as a template (Sandbox.create(snapshotID), DELETE
// /templates/{snapshotID}). withruntime's snapshots are the same thing
// under their own routes, so each call maps onto one of them; a template
// name that is a snapshot id starts the sandbox from that snapshot.

func init() {
	controlRoutes = append(controlRoutes, func(s *Server, mux *http.ServeMux) {
		mux.HandleFunc("POST /sandboxes/{id}/snapshots", s.withKey(s.createSnapshot))
		mux.HandleFunc("GET /snapshots", s.withKey(s.listSnapshots))
		mux.HandleFunc("DELETE /templates/{template}", s.withKey(s.deleteSnapshot))
		mux.HandleFunc("POST /sandboxes/{id}/fork", s.withKey(s.fork))
	})
}

// isSnapshotID says whether an E2B template id names a withruntime
// snapshot rather than a template (template names have no "_").
func isSnapshotID(id string) bool { return strings.HasPrefix(id, "snap_") }

// snapshotInfo is E2B's SnapshotInfo.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func snapshotInfoOf(sn api.Snapshot) snapshotInfo {
	names := []string{}
	if sn.Name != "" {
		names = append(names, sn.Name)
	}
	return snapshotInfo{SnapshotID: sn.ID, Names: names}
}

// createSnapshot is POST /sandboxes/{id}/snapshots: 201 SnapshotInfo.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	var req struct {
		Name   string `json:"name"`
		Memory *bool  `json:"memory"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Memory != nil && !*req.Memory {
		return unsupported("a snapshot of the file system alone (memory: false; withruntime's keeps memory and processes, and \"withruntime sandbox snapshot -t\" makes a template of the files)")
	}
	id := r.PathValue("id")
	if _, err := s.live(r, c, id); err != nil {
		return err
	}
	sn, err := c.CreateSnapshot(r.Context(), id, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, snapshotInfoOf(*sn))
	return nil
}

// listSnapshots is GET /snapshots: the account's snapshots, newest first,
// only those of sandboxID and with name as their name or id when the
// query says. They come
// as one page (no x-next-token), whatever limit says.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	q := r.URL.Query()
	all, err := c.ListSnapshots(r.Context())
	if err != nil {
		return err
	}
	out := []snapshotInfo{}
	for _, sn := range all {
		if sb := q.Get("sandboxID"); sb != "" && sn.SandboxID != sb {
			continue
		}
		if name := q.Get("name"); name != "" && sn.Name != name && sn.ID != name {
			continue
		}
		out = append(out, snapshotInfoOf(sn))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteSnapshot is DELETE /templates/{template} for a snapshot id (E2B's
// deleteSnapshot): 204, or the API's 404. Other templates are not deleted
// through E2B's API.
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	id := r.PathValue("template")
	if !isSnapshotID(id) {
		return &Error{Status: http.StatusNotImplemented, Message: templateAPIPart + " is not supported by withruntime's E2B API"}
	}
	if err := c.DeleteSnapshot(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// forkRequest is E2B's SandboxForkRequest.
type forkRequest struct {
	Timeout *int `json:"timeout"`
	Count   *int `json:"count"`
}

// forkResult is E2B's SandboxForkResult: withruntime's fork is all or
// none, so every result has its sandbox (a refusal is the call's error).
type forkResult struct {
	Sandbox sandboxAnswer `json:"sandbox"`
}

// fork is POST /sandboxes/{id}/fork: 201 with one result a fork. Each
// fork's lease is timeout seconds when the request gives one.
func (s *Server) fork(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	var req forkRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	count := 1
	if req.Count != nil {
		// The API reads 0 as 1: refuse it here, as E2B does.
		if count = *req.Count; count < 1 {
			return &Error{Status: http.StatusBadRequest, Message: "count must be 1 to 16"}
		}
	}
	id := r.PathValue("id")
	if _, err := s.live(r, c, id); err != nil {
		return err
	}
	res, err := c.Fork(r.Context(), id, count, false)
	if err != nil {
		return err
	}
	out := make([]forkResult, 0, len(res.Sandboxes))
	for i := range res.Sandboxes {
		sb := &res.Sandboxes[i]
		if req.Timeout != nil && *req.Timeout > 0 {
			if sb, err = c.SetSandboxTimeout(r.Context(), sb.ID, *req.Timeout); err != nil {
				return err
			}
		}
		out = append(out, forkResult{Sandbox: s.answerOf(sb, "", key)})
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}
