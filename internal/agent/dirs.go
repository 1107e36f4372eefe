package agent

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// handleList lists a directory (through a symlink to one), sorted by name.
// With ?limit=N it holds at most N entries, whatever the directory holds:
// the first N the directory yields, sorted, and truncated says there are
// more. It lists as ?user=.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) error {
	return s.asUser(w, r, s.list)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, _ identity) error {
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
	limit, err := listLimit(r)
	if err != nil {
		return err
	}
	ents, truncated, err := readDir(path, limit)
	if err != nil {
		return err
	}
	list := api.FileList{Entries: make([]api.FileInfo, 0, len(ents)), Truncated: truncated}
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

// handleStat describes a path, as ?user=, without following a final
// symlink.
func (s *Server) handleStat(w http.ResponseWriter, r *http.Request) error {
	return s.asUser(w, r, s.stat)
}

func (s *Server) stat(w http.ResponseWriter, r *http.Request, _ identity) error {
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

// handleMkdir makes, as ?user=, a directory and its parents, owned by that
// user; one that exists is fine.
func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) error {
	return s.asUser(w, r, s.mkdir)
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request, user identity) error {
	path, err := s.pathParam(r)
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

// listLimit is ?limit= of a listing: 0 (none) when absent.
func listLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := queryInt(r, "limit")
	if err != nil || n < 1 || n > api.MaxListLimit {
		return 0, invalidf("limit must be an integer from 1 to %d, not %q", api.MaxListLimit, v)
	}
	return int(n), nil
}

// readDir reads directory path, sorted by name: all of it when limit is
// 0, else at most limit entries, read in batches so that a huge directory
// is never held whole, and whether entries were left.
func readDir(path string, limit int) ([]os.DirEntry, bool, error) {
	if limit == 0 {
		ents, err := os.ReadDir(path) // sorted by name
		return ents, false, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var ents []os.DirEntry
	truncated := false
	for {
		batch, err := f.ReadDir(min(limit+1-len(ents), 1024))
		ents = append(ents, batch...)
		if len(ents) > limit {
			ents, truncated = ents[:limit], true
			break
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, false, err
		}
	}
	slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, truncated, nil
}
