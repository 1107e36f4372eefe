package agent

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/withruntime/withruntime/api"
)

// handleList lists a directory (through a symlink to one), sorted by name.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) error {
	path, err := s.pathParam(r)
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return conflictf("%s is not a directory", path)
	}
	ents, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return err
	}
	list := api.FileList{Entries: make([]api.FileInfo, 0, len(ents))}
	for _, e := range ents {
		efi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return err
		}
		list.Entries = append(list.Entries, fileInfo(filepath.Join(path, e.Name()), efi))
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// handleStat describes a path without following a final symlink.
func (s *Server) handleStat(w http.ResponseWriter, r *http.Request) error {
	path, err := s.pathParam(r)
	if err != nil {
		return err
	}
	info, err := statInfo(path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// handleMkdir makes a directory and its parents, owned by ?user=; one
// that exists is fine.
func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) error {
	path, err := s.pathParam(r)
	if err != nil {
		return err
	}
	user, err := s.userParam(r)
	if err != nil {
		return err
	}
	if err := mkdirsOwned(path, user.uid, user.gid); err != nil {
		return err
	}
	info, err := statInfo(path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}
