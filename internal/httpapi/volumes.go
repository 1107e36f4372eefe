package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Volumes are the accounts' named volumes (internal/volume, adapted by
// internal/server). Errors carry a sandbox.Kind.
type Volumes interface {
	Create(ctx context.Context, account, name string, sizeGiB int) (api.Volume, error)
	List(ctx context.Context, account string) ([]api.Volume, error)
	Get(ctx context.Context, account, name string) (api.Volume, error)
	Delete(ctx context.Context, account, name string) error
	// Resolve checks and claims the volumes a create of account mounts;
	// release once the create is done, whatever its outcome.
	Resolve(ctx context.Context, account string, ms []api.VolumeMount) (_ []sandbox.VolumeMount, release func(), _ error)
	// Open returns a regular file to read (rc, size) or a directory's
	// entries (rc nil).
	Open(ctx context.Context, account, name, path string) (rc io.ReadCloser, size int64, entries []api.VolumeEntry, _ error)
	Write(ctx context.Context, account, name, path string, r io.Reader) error
	Remove(ctx context.Context, account, name, path string) error
	Archive(ctx context.Context, account, name, path string, w io.Writer) error
	Extract(ctx context.Context, account, name, path string, r io.Reader) error
}

// volumes returns the configured volumes, or the error that says this
// server keeps none.
func (s *server) volumes() (Volumes, error) {
	if s.cfg.Volumes == nil {
		return nil, sandbox.Errorf(sandbox.KindNotSupported, "this server keeps no volumes")
	}
	return s.cfg.Volumes, nil
}

// resolveVolumes is the create's volumes, checked and claimed.
func (s *server) resolveVolumes(ctx context.Context, account string, ms []api.VolumeMount) ([]sandbox.VolumeMount, func(), error) {
	if len(ms) == 0 {
		return nil, func() {}, nil
	}
	v, err := s.volumes()
	if err != nil {
		return nil, nil, err
	}
	return v.Resolve(ctx, account, ms)
}

func (s *server) createVolume(w http.ResponseWriter, r *http.Request, c caller) error {
	v, err := s.volumes()
	if err != nil {
		return err
	}
	var req api.CreateVolumeRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		return err
	}
	out, err := v.Create(r.Context(), c.account, req.Name, req.SizeGiB)
	if err != nil {
		return err
	}
	infoFrom(r.Context()).target = out.Name
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *server) listVolumes(w http.ResponseWriter, r *http.Request, c caller) error {
	v, err := s.volumes()
	if err != nil {
		return err
	}
	list, err := v.List(r.Context(), c.account)
	if err != nil {
		return err
	}
	if list == nil {
		list = []api.Volume{}
	}
	writeJSON(w, http.StatusOK, api.VolumeList{Volumes: list})
	return nil
}

func (s *server) getVolume(w http.ResponseWriter, r *http.Request, c caller) error {
	v, err := s.volumes()
	if err != nil {
		return err
	}
	out, err := v.Get(r.Context(), c.account, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) deleteVolume(w http.ResponseWriter, r *http.Request, c caller) error {
	v, err := s.volumes()
	if err != nil {
		return err
	}
	if err := v.Delete(r.Context(), c.account, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) readVolumeFile(w http.ResponseWriter, r *http.Request, c caller) error {
	v, err := s.volumes()
	if err != nil {
		return err
	}
	rc, size, entries, err := v.Open(r.Context(), c.account, r.PathValue("name"), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	if rc == nil {
		if entries == nil {
			entries = []api.VolumeEntry{}
		}
		writeJSON(w, http.StatusOK, api.VolumeFileList{Entries: entries})
		return nil
	}
	ServeVolumeFile(w, rc, size)
	return nil
}

// ServeVolumeFile answers a volume's file of size bytes from rc, and
// closes rc. The sandbox may grow the file meanwhile: no more than
// announced goes out.
func ServeVolumeFile(w http.ResponseWriter, rc io.ReadCloser, size int64) {
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	io.Copy(w, io.LimitReader(rc, size))
}

func (s *server) writeVolumeFile(w http.ResponseWriter, r *http.Request, c caller) error {
	v, err := s.volumes()
	if err != nil {
		return err
	}
	if err := v.Write(r.Context(), c.account, r.PathValue("name"), r.URL.Query().Get("path"), r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) deleteVolumeFile(w http.ResponseWriter, r *http.Request, c caller) error {
	v, err := s.volumes()
	if err != nil {
		return err
	}
	if err := v.Remove(r.Context(), c.account, r.PathValue("name"), r.URL.Query().Get("path")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) volumeArchiveOut(w http.ResponseWriter, r *http.Request, c caller) error {
	v, err := s.volumes()
	if err != nil {
		return err
	}
	name, p := r.PathValue("name"), r.URL.Query().Get("path")
	// Check before the status goes out: a missing volume or path is an
	// error answer, not a broken stream.
	if rc, _, _, err := v.Open(r.Context(), c.account, name, p); err != nil {
		return err
	} else if rc != nil {
		rc.Close()
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	if err := v.Archive(r.Context(), c.account, name, p, w); err != nil {
		s.log.Warn("volume archive cut short", "volume", name, "err", err)
		panic(http.ErrAbortHandler) // the client sees a truncated stream, never a valid short one
	}
	return nil
}

func (s *server) volumeArchiveIn(w http.ResponseWriter, r *http.Request, c caller) error {
	v, err := s.volumes()
	if err != nil {
		return err
	}
	if err := v.Extract(r.Context(), c.account, r.PathValue("name"), r.URL.Query().Get("path"), r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
