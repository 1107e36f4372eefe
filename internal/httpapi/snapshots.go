package httpapi

import (
	"context"
	"net/http"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// snapshots is the sandboxes' snapshot service, or not_supported.
func (s *server) snapshots() (service.Snapshots, error) {
	ss, ok := s.cfg.Sandboxes.(service.Snapshots)
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindNotSupported, "this server takes no snapshots")
	}
	return ss, nil
}

// SnapshotView is a snapshot as the API shows it.
func SnapshotView(sn *sandbox.Snapshot) api.Snapshot {
	return api.Snapshot{
		ID: sn.ID, Name: sn.Name, SandboxID: sn.SandboxID, Isolation: sn.Spec.Isolation, Template: sn.Spec.Image,
		VCPUs: sn.Spec.VCPUs, MemoryMiB: sn.Spec.MemoryMiB, SizeBytes: sn.SizeBytes,
		CreatedAt: sn.CreatedAt, ExpiresAt: sn.ExpiresAt, FreezeMs: sn.FreezeMs,
	}
}

// createSnapshot is POST /v1/sandboxes/{id}/snapshots.
func (s *server) createSnapshot(w http.ResponseWriter, r *http.Request, c caller) error {
	ss, err := s.snapshots()
	if err != nil {
		return err
	}
	var req api.CreateSnapshotRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, true, &req); err != nil {
		return err
	}
	id := r.PathValue("id")
	infoFrom(r.Context()).sandboxID = id
	sn, err := ss.Snapshot(r.Context(), c.account, id, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, SnapshotView(sn))
	return nil
}

// fork is POST /v1/sandboxes/{id}/fork.
func (s *server) fork(w http.ResponseWriter, r *http.Request, c caller) error {
	ss, err := s.snapshots()
	if err != nil {
		return err
	}
	var req api.ForkRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, true, &req); err != nil {
		return err
	}
	if req.Count == 0 {
		req.Count = 1
	}
	id := r.PathValue("id")
	infoFrom(r.Context()).sandboxID = id
	sn, recs, err := ss.Fork(r.Context(), c.account, c.keyID, id, req.Count, req.KeepSnapshot)
	if err != nil {
		return err
	}
	out := api.ForkResult{Sandboxes: make([]api.Sandbox, 0, len(recs))}
	for _, rec := range recs {
		out.Sandboxes = append(out.Sandboxes, SandboxView(rec))
	}
	if sn != nil {
		v := SnapshotView(sn)
		out.Snapshot = &v
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// listSnapshots is GET /v1/snapshots.
func (s *server) listSnapshots(w http.ResponseWriter, r *http.Request, c caller) error {
	ss, err := s.snapshots()
	if err != nil {
		return err
	}
	list, err := ss.ListSnapshots(r.Context(), c.account)
	if err != nil {
		return err
	}
	out := api.SnapshotList{Snapshots: make([]api.Snapshot, 0, len(list))}
	for _, sn := range list {
		out.Snapshots = append(out.Snapshots, SnapshotView(sn))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getSnapshot is GET /v1/snapshots/{sid}.
func (s *server) getSnapshot(w http.ResponseWriter, r *http.Request, c caller) error {
	ss, err := s.snapshots()
	if err != nil {
		return err
	}
	sn, err := ss.GetSnapshot(r.Context(), c.account, r.PathValue("sid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SnapshotView(sn))
	return nil
}

// deleteSnapshot is DELETE /v1/snapshots/{sid}.
func (s *server) deleteSnapshot(w http.ResponseWriter, r *http.Request, c caller) error {
	ss, err := s.snapshots()
	if err != nil {
		return err
	}
	if err := ss.DeleteSnapshot(r.Context(), c.account, r.PathValue("sid")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// snapshotVolumes are the mounts of snapshot id of the account, for a
// create from it that names none: they are resolved and claimed as any
// create's. A snapshot that cannot be read gives none (the create then
// answers for it).
func (s *server) snapshotVolumes(ctx context.Context, account, id string) []api.VolumeMount {
	ss, err := s.snapshots()
	if err != nil {
		return nil
	}
	snap, err := ss.GetSnapshot(ctx, account, id)
	if err != nil {
		return nil
	}
	var out []api.VolumeMount
	for _, v := range snap.Spec.Volumes {
		out = append(out, api.VolumeMount{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	return out
}
