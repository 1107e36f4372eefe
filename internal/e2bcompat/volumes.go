package e2bcompat

import (
	"errors"
	"net/http"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// E2B's volumes (POST/GET /volumes, GET/DELETE /volumes/{volumeID}) are
// withruntime's named volumes of the key's account. A volume's E2B id is
// its withruntime name, which is unique within the account and is also
// what E2B's volumeMounts name: another account's id names nothing in the
// caller's (404). The token each answer carries is the caller's key
// sealed for that volume alone (volumeToken): the volume content API
// (volumecontent.go) takes it in place of a key.

func init() {
	controlRoutes = append(controlRoutes, func(s *Server, mux *http.ServeMux) {
		mux.HandleFunc("POST /volumes", s.withKey(s.createVolume))
		mux.HandleFunc("GET /volumes", s.withKey(s.listVolumes))
		mux.HandleFunc("GET /volumes/{volumeID}", s.withKey(s.getVolume))
		mux.HandleFunc("DELETE /volumes/{volumeID}", s.withKey(s.deleteVolume))
	})
}

// e2bVolumeGiB is the size of a volume made through E2B, whose create
// names none (a sparse image: only what is written takes room). A larger
// one is made with withruntime's own API and used by name.
const e2bVolumeGiB = 1

// volumeInfo is E2B's Volume.
type volumeInfo struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
}

// volumeAndToken is E2B's VolumeAndToken. Domain is left out: the content
// API is this listener (E2B_VOLUME_API_URL).
type volumeAndToken struct {
	volumeInfo
	Token string `json:"token"`
}

// volumeTokenScope is what a volume token is sealed for: no sandbox id or
// upload scope has this form, so a volume token opens nothing else.
func volumeTokenScope(volumeID string) string { return "volume " + volumeID }

// volumeToken is the token of volume id for key.
func (s *Server) volumeToken(id, key string) string {
	return s.tokens.seal(volumeTokenScope(id), key)
}

func (s *Server) volumeAnswer(v *api.Volume, key string) volumeAndToken {
	return volumeAndToken{volumeInfo{VolumeID: v.Name, Name: v.Name}, s.volumeToken(v.Name, key)}
}

// createVolume is POST /volumes: 201 VolumeAndToken.
func (s *Server) createVolume(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return &Error{Status: http.StatusBadRequest, Message: "a volume needs a name"}
	}
	v, err := c.CreateVolume(r.Context(), req.Name, e2bVolumeGiB)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.volumeAnswer(v, key))
	return nil
}

// listVolumes is GET /volumes: the account's volumes.
func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	vs, err := c.ListVolumes(r.Context())
	if err != nil {
		return err
	}
	out := make([]volumeInfo, 0, len(vs))
	for _, v := range vs {
		out = append(out, volumeInfo{VolumeID: v.Name, Name: v.Name})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getVolume is GET /volumes/{volumeID}: VolumeAndToken.
func (s *Server) getVolume(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	v, err := s.volume(r, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.volumeAnswer(v, key))
	return nil
}

// deleteVolume is DELETE /volumes/{volumeID}: 204; 409 while a live or
// paused sandbox mounts it.
func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	if _, err := s.volume(r, c); err != nil {
		return err
	}
	if err := c.DeleteVolume(r.Context(), r.PathValue("volumeID")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// volume is the volume the path's volumeID names. An id that could name
// no volume is not found, as E2B answers any unknown id.
func (s *Server) volume(r *http.Request, c *client.Client) (*api.Volume, error) {
	id := r.PathValue("volumeID")
	v, err := c.GetVolume(r.Context(), id)
	if errors.Is(err, client.ErrInvalidRequest) {
		return nil, volumeNotFound(id)
	}
	return v, err
}

func volumeNotFound(id string) error {
	return &Error{Status: http.StatusNotFound, Message: "volume " + strings.TrimSpace(id) + " not found"}
}
