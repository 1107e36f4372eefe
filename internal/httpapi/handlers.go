package httpapi

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/accounts"
	"github.com/withruntime/withruntime/internal/buildinfo"
	"github.com/withruntime/withruntime/internal/sandbox"
)

func (s *server) health(w http.ResponseWriter, r *http.Request, _ caller) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": buildinfo.Version("")})
	return nil
}

func (s *server) create(w http.ResponseWriter, r *http.Request, c caller) error {
	var req api.CreateSandboxRequest
	// An empty body asks for every default, as {} does.
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, true, &req); err != nil {
		return err
	}
	// A trial account's create is cut to the trial's size.
	size := accounts.SizeRequest{VCPUs: req.VCPUs, MemoryMiB: req.MemoryMiB, DiskGiB: req.DiskGiB}
	if err := s.accounts.CutToTrial(r.Context(), c.account, &size); err != nil {
		return err
	}
	req.VCPUs, req.MemoryMiB, req.DiskGiB = size.VCPUs, size.MemoryMiB, size.DiskGiB
	cr, err := createRequest(req)
	if err != nil {
		return err
	}
	if req.Snapshot != "" && len(req.Volumes) == 0 {
		req.Volumes = s.snapshotVolumes(r.Context(), c.account, req.Snapshot)
	}
	var release func()
	cr.Volumes, release, err = s.resolveVolumes(r.Context(), c.account, req.Volumes)
	if err != nil {
		return err
	}
	rec, err := s.cfg.Sandboxes.Create(r.Context(), c.account, c.keyID, cr)
	release()
	if err != nil {
		return err
	}
	infoFrom(r.Context()).sandboxID = rec.ID
	writeJSON(w, http.StatusCreated, SandboxView(rec))
	return nil
}

func (s *server) list(w http.ResponseWriter, r *http.Request, c caller) error {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		return err
	}
	recs, err := s.cfg.Sandboxes.List(r.Context(), c.account)
	if err != nil {
		return err
	}
	recs, next := lq.page(recs, time.Now())
	out := api.SandboxList{Sandboxes: make([]api.Sandbox, 0, len(recs)), NextPageToken: next}
	for _, rec := range recs {
		out.Sandboxes = append(out.Sandboxes, SandboxView(rec))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) get(w http.ResponseWriter, r *http.Request, c caller) error {
	return s.answer(w, r, c, s.cfg.Sandboxes.Get)
}

func (s *server) stop(w http.ResponseWriter, r *http.Request, c caller) error {
	return s.answer(w, r, c, s.cfg.Sandboxes.Stop)
}

func (s *server) pause(w http.ResponseWriter, r *http.Request, c caller) error {
	return s.answer(w, r, c, s.cfg.Sandboxes.Pause)
}

func (s *server) resume(w http.ResponseWriter, r *http.Request, c caller) error {
	return s.answer(w, r, c, s.cfg.Sandboxes.Resume)
}

// maxTimeoutSeconds keeps a lease in seconds representable as a
// time.Duration; the manager sets the real bound.
const maxTimeoutSeconds = math.MaxInt64 / int64(time.Second)

func (s *server) extend(w http.ResponseWriter, r *http.Request, c caller) error {
	var req api.ExtendRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		return err
	}
	if req.TimeoutSeconds <= 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "timeout_seconds must be a positive number of seconds")
	}
	if int64(req.TimeoutSeconds) > maxTimeoutSeconds {
		return sandbox.Errorf(sandbox.KindInvalid, "timeout_seconds is too large")
	}
	move := s.cfg.Sandboxes.Extend
	if req.Exact {
		move = s.cfg.Sandboxes.SetLease
	}
	rec, err := move(r.Context(), c.account, r.PathValue("id"), time.Duration(req.TimeoutSeconds)*time.Second)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SandboxView(rec))
	return nil
}

// answer runs a per-sandbox call and answers with the sandbox it returns.
func (s *server) answer(w http.ResponseWriter, r *http.Request, c caller, call func(ctx context.Context, account, id string) (*sandbox.Record, error)) error {
	rec, err := call(r.Context(), c.account, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SandboxView(rec))
	return nil
}
