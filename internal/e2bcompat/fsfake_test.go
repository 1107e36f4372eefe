package e2bcompat

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// fakeFiles is withruntime's files API over an in-memory tree, for
// sandbox "run" and key "wr_good": what the E2B layer translates to, with
// the API's own shapes and error codes. Writing under /full fails the way
// a full disk does.
type fakeFiles struct {
	mu    sync.Mutex
	files map[string][]byte // path -> content; directories are nil
	puts  []string
	users map[string]string // path -> the user= of the last call naming it
	attrs map[string]map[string]string
}

func newFakeFiles() *fakeFiles {
	return &fakeFiles{files: map[string][]byte{"/": nil, "/home": nil, "/home/user": nil, "/root": nil}, users: map[string]string{}, attrs: map[string]map[string]string{}}
}

func apiError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg}})
}

func (f *fakeFiles) info(p string) api.FileInfo {
	c, isFile := f.files[p]
	fi := api.FileInfo{Name: path.Base(p), Path: p, Type: api.FileTypeDir, Mode: 0o755, ModTime: time.Unix(1700000000, 0).UTC()}
	if isFile && c != nil {
		fi.Type, fi.Size, fi.Mode = api.FileTypeFile, int64(len(c)), 0o644
	}
	fi.Attrs = f.attrs[p]
	return fi
}

func (f *fakeFiles) isDir(p string) bool {
	c, ok := f.files[p]
	return ok && c == nil
}

func (f *fakeFiles) mkdirs(p string) {
	for ; p != "/"; p = path.Dir(p) {
		if _, ok := f.files[p]; !ok {
			f.files[p] = nil
		}
	}
}

func (f *fakeFiles) handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	guard := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer wr_good" {
				apiError(w, 401, "unauthorized", "invalid API key")
				return
			}
			if r.PathValue("id") != "run" {
				apiError(w, 404, "not_found", "no such sandbox")
				return
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			h(w, r)
		}
	}
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	absPath := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		p := r.URL.Query().Get("path")
		if !strings.HasPrefix(p, "/") {
			t.Errorf("the API got relative path %q: the E2B layer must resolve it", p)
			apiError(w, 400, "invalid_request", "relative")
			return "", false
		}
		f.users[p] = r.URL.Query().Get("user")
		return p, true
	}
	mux.HandleFunc("GET /v1/sandboxes/{id}", guard(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"id": "run", "state": "running"})
	}))
	mux.HandleFunc("GET /v1/sandboxes/{id}/files", guard(func(w http.ResponseWriter, r *http.Request) {
		p, ok := absPath(w, r)
		if !ok {
			return
		}
		c, found := f.files[p]
		switch {
		case !found:
			apiError(w, 404, "not_found", p+": no such file or directory")
		case c == nil:
			apiError(w, 400, "invalid_request", p+" is a directory")
		default:
			w.Write(c)
		}
	}))
	mux.HandleFunc("PUT /v1/sandboxes/{id}/files", guard(func(w http.ResponseWriter, r *http.Request) {
		p, ok := absPath(w, r)
		if !ok {
			return
		}
		b, _ := io.ReadAll(r.Body)
		if strings.HasPrefix(p, "/full/") {
			apiError(w, 413, "payload_too_large", p+": no space left on device")
			return
		}
		for _, a := range r.URL.Query()["attr"] {
			if strings.HasSuffix(a, "=bad") { // as the agent refuses one
				apiError(w, 400, "invalid_request", "attr "+a+": not printable")
				return
			}
		}
		if p == "/home/user/old-agent.txt" {
			r.URL.RawQuery = "" // an agent older than attributes
		}
		f.mkdirs(path.Dir(p))
		f.files[p] = append([]byte{}, b...)
		f.puts = append(f.puts, p)
		delete(f.attrs, p) // a write replaces the file
		for _, a := range r.URL.Query()["attr"] {
			name, value, _ := strings.Cut(a, "=")
			if f.attrs[p] == nil {
				f.attrs[p] = map[string]string{}
			}
			f.attrs[p][name] = value
		}
		writeJSON(w, f.info(p))
	}))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}/files", guard(func(w http.ResponseWriter, r *http.Request) {
		p, ok := absPath(w, r)
		if !ok {
			return
		}
		if _, found := f.files[p]; !found {
			apiError(w, 404, "not_found", p+": no such file or directory")
			return
		}
		for q := range f.files {
			if q == p || strings.HasPrefix(q, p+"/") {
				delete(f.files, q)
			}
		}
		w.WriteHeader(204)
	}))
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/stat", guard(func(w http.ResponseWriter, r *http.Request) {
		p, ok := absPath(w, r)
		if !ok {
			return
		}
		if _, found := f.files[p]; !found {
			apiError(w, 404, "not_found", p+": no such file or directory")
			return
		}
		writeJSON(w, f.info(p))
	}))
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/list", guard(func(w http.ResponseWriter, r *http.Request) {
		p, ok := absPath(w, r)
		if !ok {
			return
		}
		if !f.isDir(p) {
			apiError(w, 404, "not_found", p+": no such directory")
			return
		}
		l := api.FileList{Entries: []api.FileInfo{}}
		for q := range f.files {
			if q != "/" && path.Dir(q) == p {
				l.Entries = append(l.Entries, f.info(q))
			}
		}
		sort.Slice(l.Entries, func(i, j int) bool { return l.Entries[i].Path < l.Entries[j].Path })
		writeJSON(w, l)
	}))
	mux.HandleFunc("POST /v1/sandboxes/{id}/files/mkdir", guard(func(w http.ResponseWriter, r *http.Request) {
		p, ok := absPath(w, r)
		if !ok {
			return
		}
		f.mkdirs(p)
		writeJSON(w, f.info(p))
	}))
	return mux
}

// newFilesServer is an E2B server over a fakeFiles, and a request maker
// for envd routes of sandbox "run" with a good token.
func newFilesServer(t *testing.T) (*Server, *fakeFiles, func(method, target string, body []byte, hdr ...string) *http.Request) {
	t.Helper()
	ff := newFakeFiles()
	s, err := New(Config{API: ff.handler(t), Secret: bytes.Repeat([]byte{9}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	tok := s.sealToken("run", "wr_good")
	mk := func(method, target string, body []byte, hdr ...string) *http.Request {
		r, _ := http.NewRequest(method, "http://e2b.test"+target, bytes.NewReader(body))
		r.Header.Set(headerSandboxID, "run")
		r.Header.Set(headerSandboxPort, EnvdPort)
		r.Header.Set(headerAccessToken, tok)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	return s, ff, mk
}
