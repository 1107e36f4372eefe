package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/httpapi"
	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// nodeVolumes serves the node RPC's volume paths (noderpc.PathVolume*)
// over a node's volumes: what an API server forwards of the public
// volumes API (clusterVolumes).
type nodeVolumes struct {
	api    *volumeAPI
	fenced func() bool
	log    *slog.Logger
}

// mount adds the volume paths to mux.
func (v *nodeVolumes) mount(mux *http.ServeMux) {
	mux.HandleFunc("POST "+noderpc.PathVolumes, v.handle(v.create))
	mux.HandleFunc("GET "+noderpc.PathVolume, v.handle(v.get))
	mux.HandleFunc("DELETE "+noderpc.PathVolume, v.handle(v.remove))
	mux.HandleFunc("GET "+noderpc.PathVolumeFiles, v.handle(v.read))
	mux.HandleFunc("PUT "+noderpc.PathVolumeFiles, v.handle(v.write))
	mux.HandleFunc("DELETE "+noderpc.PathVolumeFiles, v.handle(v.removePath))
	mux.HandleFunc("GET "+noderpc.PathVolumeArchive, v.handle(v.archiveOut))
	mux.HandleFunc("PUT "+noderpc.PathVolumeArchive, v.handle(v.archiveIn))
}

// volumeCall is one volume call: the account, the volume and the path in
// it, from the request.
type volumeCall struct{ account, name, path string }

func (v *nodeVolumes) handle(h func(w http.ResponseWriter, r *http.Request, c volumeCall) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := sandbox.Errorf(sandbox.KindConflict, "this node is fenced: it cannot reach the store")
		if !v.fenced() {
			q := r.URL.Query()
			err = h(w, r, volumeCall{q.Get("account"), r.PathValue("name"), q.Get("path")})
		}
		if err != nil {
			status, body := noderpc.ErrorAnswer(err)
			if status == http.StatusInternalServerError {
				v.log.Error("node rpc: volume", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeNodeJSON(w, status, body)
		}
	}
}

func writeNodeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // the status is sent: a failure is the caller gone
}

func (v *nodeVolumes) create(w http.ResponseWriter, r *http.Request, _ volumeCall) error {
	var req noderpc.VolumeCreateRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		return sandbox.Errorf(sandbox.KindInvalid, "request body: %v", err)
	}
	out, err := v.api.Create(r.Context(), req.Account, req.Name, req.SizeGiB)
	if err != nil {
		return err
	}
	writeNodeJSON(w, http.StatusCreated, out)
	return nil
}

func (v *nodeVolumes) get(w http.ResponseWriter, r *http.Request, c volumeCall) error {
	out, err := v.api.Get(r.Context(), c.account, c.name)
	if err != nil {
		return err
	}
	writeNodeJSON(w, http.StatusOK, out)
	return nil
}

func (v *nodeVolumes) remove(w http.ResponseWriter, r *http.Request, c volumeCall) error {
	if err := v.api.Delete(r.Context(), c.account, c.name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (v *nodeVolumes) read(w http.ResponseWriter, r *http.Request, c volumeCall) error {
	rc, size, entries, err := v.api.Open(r.Context(), c.account, c.name, c.path)
	if err != nil {
		return err
	}
	if rc == nil {
		w.Header().Set(noderpc.HeaderVolumeDir, "1")
		writeNodeJSON(w, http.StatusOK, api.VolumeFileList{Entries: entries})
		return nil
	}
	httpapi.ServeVolumeFile(w, rc, size)
	return nil
}

func (v *nodeVolumes) write(w http.ResponseWriter, r *http.Request, c volumeCall) error {
	if err := v.api.Write(r.Context(), c.account, c.name, c.path, r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (v *nodeVolumes) removePath(w http.ResponseWriter, r *http.Request, c volumeCall) error {
	if err := v.api.Remove(r.Context(), c.account, c.name, c.path); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (v *nodeVolumes) archiveOut(w http.ResponseWriter, r *http.Request, c volumeCall) error {
	// Checked before the status goes out, as the public API does.
	if rc, _, _, err := v.api.Open(r.Context(), c.account, c.name, c.path); err != nil {
		return err
	} else if rc != nil {
		rc.Close()
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	if err := v.api.Archive(r.Context(), c.account, c.name, c.path, w); err != nil {
		v.log.Warn("volume archive cut short", "volume", c.name, "err", err)
		panic(http.ErrAbortHandler) // a truncated stream, never a valid short one
	}
	return nil
}

func (v *nodeVolumes) archiveIn(w http.ResponseWriter, r *http.Request, c volumeCall) error {
	if err := v.api.Extract(r.Context(), c.account, c.name, c.path, r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
