package e2bcompat

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// E2B's volume content API (spec/openapi-volumecontent.yml): a volume's
// files without a sandbox, under /volumecontent/{volumeID}, authorised by
// the volume's token (Authorization: Bearer). Each call maps onto
// withruntime's volume files API (/v1/volumes/{name}/files and /archive)
// with the key the token holds.

func init() {
	controlRoutes = append(controlRoutes, func(s *Server, mux *http.ServeMux) {
		const p = "/volumecontent/{volumeID}"
		mux.HandleFunc("GET "+p+"/path", s.withVolumeToken(s.statPath))
		mux.HandleFunc("PATCH "+p+"/path", s.withVolumeToken(s.patchPath))
		mux.HandleFunc("DELETE "+p+"/path", s.withVolumeToken(s.removePath))
		mux.HandleFunc("GET "+p+"/dir", s.withVolumeToken(s.listDir))
		mux.HandleFunc("POST "+p+"/dir", s.withVolumeToken(s.makeDir))
		mux.HandleFunc("GET "+p+"/file", s.withVolumeToken(s.readVolumeFile))
		mux.HandleFunc("PUT "+p+"/file", s.withVolumeToken(s.writeVolumeFile))
	})
}

const (
	// maxVolumeListing bounds the entries one listing answers, all its
	// depths together, and the entries one removal walks.
	maxVolumeListing = 10000
	// maxVolumeDepth bounds a listing's depth and a removal's.
	maxVolumeDepth = 32
)

// volumeHandler is a content handler: c acts with the key of the token,
// vol is the volume and p the request's path, made absolute and clean.
type volumeHandler func(w http.ResponseWriter, r *http.Request, c *client.Client, vol, p string) error

// withVolumeToken opens the request's volume token for the volume in its
// path (a token opens only its own volume) and answers a handler's error
// in the content API's shape.
func (s *Server) withVolumeToken(h volumeHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		vol := r.PathValue("volumeID")
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || tok == "" {
			writeVolumeError(w, &Error{Status: http.StatusUnauthorized, Message: "missing volume token (Authorization: Bearer)"})
			return
		}
		key, err := s.tokens.open(volumeTokenScope(vol), strings.TrimSpace(tok))
		if err != nil {
			writeVolumeError(w, &Error{Status: http.StatusUnauthorized, Message: "invalid volume token"})
			return
		}
		q := r.URL.Query().Get("path")
		if q == "" {
			writeVolumeError(w, &Error{Status: http.StatusBadRequest, Message: "path is required"})
			return
		}
		if err := h(w, r, s.client(key), vol, path.Clean("/"+q)); err != nil {
			writeVolumeError(w, err)
		}
	}
}

// writeVolumeError answers err in the content API's Error shape, whose
// code is a string: withruntime's code, or the status's name.
func writeVolumeError(w http.ResponseWriter, err error) {
	status := httpStatus(err)
	code := strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Code != "" {
		code = apiErr.Code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"code": code, "message": message(err)})
}

// entryStat is E2B's VolumeEntryStat. withruntime keeps one time per
// entry, its modification time, which all three times report.
type entryStat struct {
	Name  string    `json:"name"`
	Type  string    `json:"type"`
	Path  string    `json:"path"`
	Size  int64     `json:"size"`
	Mode  uint32    `json:"mode"`
	UID   uint32    `json:"uid"`
	GID   uint32    `json:"gid"`
	ATime time.Time `json:"atime"`
	MTime time.Time `json:"mtime"`
	CTime time.Time `json:"ctime"`
}

// e2bEntryTypes are E2B's names of withruntime's entry types.
var e2bEntryTypes = map[string]string{"file": "file", "dir": "directory", "symlink": "symlink"}

func statOf(dir string, e api.VolumeEntry) entryStat {
	t, ok := e2bEntryTypes[e.Type]
	if !ok {
		t = "unknown"
	}
	return entryStat{Name: e.Name, Type: t, Path: path.Join(dir, e.Name), Size: e.Size,
		Mode: e.Mode, UID: e.UID, GID: e.GID, ATime: e.MTime, MTime: e.MTime, CTime: e.MTime}
}

func pathNotFound(p string) error {
	return &Error{Status: http.StatusNotFound, Message: "path " + p + " not found"}
}

// missing sorts out the API's not_found (or invalid_request, for a
// name no volume may have) under path calls: the volume's own absence is
// E2B's volume not found, a path's is nil (the caller answers it).
func missing(ctx context.Context, c *client.Client, vol string, err error) error {
	if !errors.Is(err, client.ErrNotFound) && !errors.Is(err, client.ErrInvalidRequest) {
		return err
	}
	if _, gerr := c.GetVolume(ctx, vol); gerr != nil {
		if errors.Is(gerr, client.ErrNotFound) || errors.Is(gerr, client.ErrInvalidRequest) {
			return volumeNotFound(vol)
		}
		return gerr
	}
	if errors.Is(err, client.ErrNotFound) {
		return nil
	}
	return err
}

// entries lists directory dir of vol: found false when dir is missing or
// is not a directory.
func entries(ctx context.Context, c *client.Client, vol, dir string) (_ []api.VolumeEntry, found bool, _ error) {
	isDir, err := c.VolumePathIsDir(ctx, vol, dir)
	if err != nil {
		return nil, false, missing(ctx, c, vol, err)
	}
	if !isDir {
		return nil, false, nil
	}
	es, err := c.ListVolumeFiles(ctx, vol, dir)
	if err != nil {
		return nil, false, missing(ctx, c, vol, err)
	}
	return es, true, nil
}

// stat is path p of vol; found false when it is missing. The root is
// reported as a directory with the volume's creation time.
func stat(ctx context.Context, c *client.Client, vol, p string) (_ entryStat, found bool, _ error) {
	if p == "/" {
		v, err := c.GetVolume(ctx, vol)
		if err != nil {
			if err = missing(ctx, c, vol, err); err == nil {
				err = volumeNotFound(vol)
			}
			return entryStat{}, false, err
		}
		t := v.CreatedAt
		return entryStat{Name: "", Type: "directory", Path: "/", Mode: 0o755, ATime: t, MTime: t, CTime: t}, true, nil
	}
	dir, name := path.Split(p)
	es, ok, err := entries(ctx, c, vol, path.Clean(dir))
	if err != nil || !ok {
		return entryStat{}, false, err
	}
	for _, e := range es {
		if e.Name == name {
			return statOf(path.Clean(dir), e), true, nil
		}
	}
	return entryStat{}, false, nil
}

// existing is stat of a path that must be there (404 when it is not).
func existing(ctx context.Context, c *client.Client, vol, p string) (entryStat, error) {
	st, ok, err := stat(ctx, c, vol, p)
	if err == nil && !ok {
		err = pathNotFound(p)
	}
	return st, err
}

// statPath is GET /path: the entry's VolumeEntryStat.
func (s *Server) statPath(w http.ResponseWriter, r *http.Request, c *client.Client, vol, p string) error {
	st, err := existing(r.Context(), c, vol, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// ownerOrMode refuses uid, gid and mode: withruntime writes a volume's
// files as the sandbox's user, with the modes it gives them.
func ownerOrMode(r *http.Request) error {
	q := r.URL.Query()
	for _, k := range []string{"uid", "gid", "mode"} {
		if q.Has(k) {
			return unsupported("setting an entry's owner or mode (" + k + ")")
		}
	}
	return nil
}

// patchPath is PATCH /path: withruntime cannot change an entry's owner or
// mode, so an existing path is answered 400 naming that.
func (s *Server) patchPath(w http.ResponseWriter, r *http.Request, c *client.Client, vol, p string) error {
	if _, err := existing(r.Context(), c, vol, p); err != nil {
		return err
	}
	return unsupported("changing an entry's owner or mode (PATCH /volumecontent/{volumeID}/path)")
}

// removePath is DELETE /path: a file, a link or a directory with all it
// holds (at most maxVolumeListing entries, maxVolumeDepth deep).
func (s *Server) removePath(w http.ResponseWriter, r *http.Request, c *client.Client, vol, p string) error {
	if p == "/" {
		return &Error{Status: http.StatusBadRequest, Message: "the volume's root cannot be removed (DELETE /volumes/{volumeID} removes the volume)"}
	}
	st, err := existing(r.Context(), c, vol, p)
	if err != nil {
		return err
	}
	budget := maxVolumeListing
	if err := removeAll(r.Context(), c, vol, p, st.Type == "directory", 0, &budget); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeAll removes p, a directory's entries first; budget is what is left
// of the entries one removal may walk.
func removeAll(ctx context.Context, c *client.Client, vol, p string, dir bool, depth int, budget *int) error {
	if dir {
		if depth > maxVolumeDepth {
			return &Error{Status: http.StatusBadRequest, Message: "directories nested deeper than " + strconv.Itoa(maxVolumeDepth) + " cannot be removed at once"}
		}
		es, err := c.ListVolumeFiles(ctx, vol, p)
		if err != nil {
			return err
		}
		if *budget -= len(es); *budget < 0 {
			return &Error{Status: http.StatusBadRequest, Message: "more than " + strconv.Itoa(maxVolumeListing) + " entries to remove at once: remove their directories one by one"}
		}
		for _, e := range es {
			if err := removeAll(ctx, c, vol, path.Join(p, e.Name), e.Type == "dir", depth+1, budget); err != nil {
				return err
			}
		}
	}
	return c.DeleteVolumeFile(ctx, vol, p)
}

// listDir is GET /dir: the entries of a directory down to depth (default
// 1), at most maxVolumeListing of them.
func (s *Server) listDir(w http.ResponseWriter, r *http.Request, c *client.Client, vol, p string) error {
	depth := 1
	if d := r.URL.Query().Get("depth"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return &Error{Status: http.StatusBadRequest, Message: "depth must be a whole number, 0 or more"}
		}
		depth = max(n, 1)
	}
	if depth > maxVolumeDepth {
		return &Error{Status: http.StatusBadRequest, Message: "depth is at most " + strconv.Itoa(maxVolumeDepth)}
	}
	es, ok, err := entries(r.Context(), c, vol, p)
	if err != nil {
		return err
	}
	if !ok {
		return pathNotFound(p)
	}
	out := []entryStat{}
	type level struct {
		dir string
		es  []api.VolumeEntry
		d   int
	}
	queue := []level{{p, es, 1}}
	for len(queue) > 0 {
		l := queue[0]
		queue = queue[1:]
		for _, e := range l.es {
			if len(out) == maxVolumeListing {
				return &Error{Status: http.StatusBadRequest, Message: "more than " + strconv.Itoa(maxVolumeListing) + " entries: list with a smaller depth"}
			}
			st := statOf(l.dir, e)
			out = append(out, st)
			if e.Type == "dir" && l.d < depth {
				sub, err := c.ListVolumeFiles(r.Context(), vol, st.Path)
				if errors.Is(err, client.ErrNotFound) {
					continue // gone meanwhile
				}
				if err != nil {
					return err
				}
				queue = append(queue, level{st.Path, sub, l.d + 1})
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// emptyTar is an archive of nothing: extracted into a path, it makes that
// directory and its parents.
var emptyTar = func() []byte {
	var b bytes.Buffer
	tar.NewWriter(&b).Close()
	return b.Bytes()
}()

// makeDir is POST /dir: 201 with the new directory's VolumeEntryStat. An
// existing path is a conflict; a missing parent is not found unless force.
func (s *Server) makeDir(w http.ResponseWriter, r *http.Request, c *client.Client, vol, p string) error {
	if err := ownerOrMode(r); err != nil {
		return err
	}
	force := r.URL.Query().Get("force") == "true"
	if _, ok, err := stat(r.Context(), c, vol, p); err != nil {
		return err
	} else if ok {
		return &Error{Status: http.StatusConflict, Message: "path " + p + " already exists"}
	}
	if parent := path.Dir(p); !force && parent != "/" {
		st, ok, err := stat(r.Context(), c, vol, parent)
		if err != nil {
			return err
		}
		if !ok || st.Type != "directory" {
			return pathNotFound(parent)
		}
	}
	if err := c.UploadVolumeArchive(r.Context(), vol, p, bytes.NewReader(emptyTar)); err != nil {
		return err
	}
	return s.answerStat(w, r, c, vol, p)
}

// answerStat answers 201 with p's VolumeEntryStat, just made.
func (s *Server) answerStat(w http.ResponseWriter, r *http.Request, c *client.Client, vol, p string) error {
	st, err := existing(r.Context(), c, vol, p) // 404 if removed meanwhile
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, st)
	return nil
}

// readVolumeFile is GET /file: the file's bytes, streamed.
func (s *Server) readVolumeFile(w http.ResponseWriter, r *http.Request, c *client.Client, vol, p string) error {
	st, err := existing(r.Context(), c, vol, p)
	if err != nil {
		return err
	}
	if st.Type != "file" {
		return &Error{Status: http.StatusBadRequest, Message: "path " + p + " is not a file"}
	}
	rc, err := c.OpenVolumeFile(r.Context(), vol, p)
	if errors.Is(err, client.ErrNotFound) {
		return pathNotFound(p)
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	io.Copy(w, rc)
	return nil
}

// writeVolumeFile is PUT /file: the body, streamed into the file (its
// parents made); 201 with its VolumeEntryStat. force=false refuses an
// existing file (409); without force a file is overwritten.
func (s *Server) writeVolumeFile(w http.ResponseWriter, r *http.Request, c *client.Client, vol, p string) error {
	if err := ownerOrMode(r); err != nil {
		return err
	}
	st, ok, err := stat(r.Context(), c, vol, p)
	if err != nil {
		return err
	}
	switch {
	case ok && st.Type == "directory":
		return &Error{Status: http.StatusConflict, Message: "path " + p + " is a directory"}
	case ok && r.URL.Query().Get("force") == "false":
		return &Error{Status: http.StatusConflict, Message: "path " + p + " already exists (force it to overwrite)"}
	}
	if err := c.WriteVolumeFile(r.Context(), vol, p, r.Body); err != nil {
		return err
	}
	return s.answerStat(w, r, c, vol, p)
}
