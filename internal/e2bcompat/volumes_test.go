package e2bcompat

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// volumesAPI is a stand-in for withruntime's volume routes, in memory: each
// key ("wr_good", "wr_other") is an account of its own, a volume a map of
// absolute paths to files (a nil value is a directory). Sandbox routes go
// to the control fake.
type volumesAPI struct {
	sandboxes *controlAPI
	mu        sync.Mutex
	accounts  map[string]map[string]*fakeVolume
}

type fakeVolume struct {
	created time.Time
	files   map[string][]byte
	mounted []string
}

func (f *volumesAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/volumes")
	if !ok {
		f.sandboxes.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	answer, fail := answering(w)
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	vols := f.accounts[key]
	if vols == nil {
		fail(401, "unauthorized")
		return
	}
	view := func(name string, v *fakeVolume) api.Volume {
		return api.Volume{Name: name, SizeGiB: 1, CreatedAt: v.created, MountedBy: v.mounted}
	}
	name, sub, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	if name == "" {
		switch r.Method {
		case http.MethodPost:
			var req api.CreateVolumeRequest
			json.NewDecoder(r.Body).Decode(&req)
			if vols[req.Name] != nil {
				fail(409, "conflict")
				return
			}
			if req.Name != strings.ToLower(req.Name) || req.SizeGiB != 1 {
				fail(400, "invalid_request")
				return
			}
			vols[req.Name] = &fakeVolume{created: time.Now(), files: map[string][]byte{"/": nil}}
			answer(201, view(req.Name, vols[req.Name]))
		default:
			l := api.VolumeList{Volumes: []api.Volume{}}
			for n, v := range vols {
				l.Volumes = append(l.Volumes, view(n, v))
			}
			answer(200, l)
		}
		return
	}
	v := vols[name]
	if v == nil {
		fail(404, "not_found")
		return
	}
	p := path.Clean(r.URL.Query().Get("path"))
	data, exists := v.files[p]
	isDir := exists && data == nil
	switch r.Method + " " + sub {
	case "GET ":
		answer(200, view(name, v))
	case "DELETE ":
		if len(v.mounted) > 0 {
			fail(409, "conflict")
			return
		}
		delete(vols, name)
		w.WriteHeader(204)
	case "GET files":
		switch {
		case !exists:
			fail(404, "not_found")
		case isDir:
			l := api.VolumeFileList{Entries: []api.VolumeEntry{}}
			for q, d := range v.files {
				if q != "/" && path.Dir(q) == p {
					e := api.VolumeEntry{Name: path.Base(q), Type: "file", Size: int64(len(d)), Mode: 0o644, UID: 1000, GID: 1000, MTime: v.created}
					if d == nil {
						e.Type, e.Mode = "dir", 0o755
					}
					l.Entries = append(l.Entries, e)
				}
			}
			answer(200, l)
		default:
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(data)
		}
	case "PUT files":
		if isDir {
			fail(400, "invalid_request")
			return
		}
		b, _ := io.ReadAll(r.Body)
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			v.files[d] = nil
		}
		v.files[p] = append([]byte{}, b...)
		w.WriteHeader(204)
	case "PUT archive":
		if _, err := tar.NewReader(r.Body).Next(); err != io.EOF {
			fail(400, "invalid_request") // only empty archives here
			return
		}
		for d := p; d != "/"; d = path.Dir(d) {
			v.files[d] = nil
		}
		w.WriteHeader(204)
	case "DELETE files":
		if !exists {
			fail(404, "not_found")
			return
		}
		for q := range v.files {
			if path.Dir(q) == p && q != "/" {
				fail(409, "conflict") // not empty
				return
			}
		}
		delete(v.files, p)
		w.WriteHeader(204)
	default:
		fail(404, "not_found")
	}
}

func newVolumes(t *testing.T) (*Server, *volumesAPI) {
	t.Helper()
	f := &volumesAPI{sandboxes: &controlAPI{sbx: map[string]*api.Sandbox{}}, accounts: map[string]map[string]*fakeVolume{
		"wr_good": {}, "wr_other": {},
	}}
	s, err := New(Config{API: f, Secret: bytes.Repeat([]byte{9}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

// e2bError reads an E2B error body's message, failing unless it has the
// shape with status as its code.
func e2bError(t *testing.T, status int, body []byte) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil || e.Code != status {
		t.Fatalf("error body %s: want E2B's shape with code %d", body, status)
	}
	return e.Message
}

func TestVolumesControl(t *testing.T) {
	s, f := newVolumes(t)
	st, _, body := call(s, "wr_good", "POST", "/volumes", `{"name":"data"}`)
	var vt volumeAndToken
	if st != 201 || json.Unmarshal(body, &vt) != nil || vt.VolumeID != "data" || vt.Name != "data" || vt.Token == "" {
		t.Fatalf("create: %d %s", st, body)
	}
	if strings.Contains(vt.Token, "wr_good") || !strings.HasPrefix(vt.Token, tokenPrefix) {
		t.Fatalf("the token %q holds the key in clear or is not ours", vt.Token)
	}
	if st, _, body := call(s, "wr_good", "POST", "/volumes", `{"name":"data"}`); st != 409 {
		t.Errorf("a second create of one name: %d %s", st, body)
	} else {
		e2bError(t, 409, body)
	}
	if st, _, body := call(s, "wr_good", "POST", "/volumes", `{}`); st != 400 {
		t.Errorf("a create without a name: %d %s", st, body)
	}
	call(s, "wr_good", "POST", "/volumes", `{"name":"logs"}`)
	st, _, body = call(s, "wr_good", "GET", "/volumes", "")
	var list []volumeInfo
	if st != 200 || json.Unmarshal(body, &list) != nil || len(list) != 2 {
		t.Fatalf("list: %d %s", st, body)
	}
	names := []string{list[0].VolumeID, list[1].Name}
	slices.Sort(names)
	if names[0] != "data" || names[1] != "logs" {
		t.Errorf("list: %s", body)
	}
	st, _, body = call(s, "wr_good", "GET", "/volumes/data", "")
	var got volumeAndToken
	if st != 200 || json.Unmarshal(body, &got) != nil || got != vt {
		t.Errorf("get: %d %s, want %+v (the same token every time)", st, body, vt)
	}
	// Another account's id names nothing in the caller's; nor does an id
	// no volume may have.
	for _, id := range []string{"data", "No-Such"} {
		if st, _, body := call(s, "wr_other", "GET", "/volumes/"+id, ""); st != 404 {
			t.Errorf("another account's %s: %d %s", id, st, body)
		} else {
			e2bError(t, 404, body)
		}
	}
	if st, _, _ := call(s, "wr_other", "DELETE", "/volumes/data", ""); st != 404 {
		t.Errorf("another account's delete: %d", st)
	}
	f.accounts["wr_good"]["data"].mounted = []string{"sbx1"}
	if st, _, body := call(s, "wr_good", "DELETE", "/volumes/data", ""); st != 409 {
		t.Errorf("delete of a mounted volume: %d %s", st, body)
	}
	f.accounts["wr_good"]["data"].mounted = nil
	if st, _, _ := call(s, "wr_good", "DELETE", "/volumes/data", ""); st != 204 {
		t.Errorf("delete: %d", st)
	}
	if st, _, _ := call(s, "wr_good", "DELETE", "/volumes/data", ""); st != 404 {
		t.Errorf("a second delete: %d", st)
	}
	if st, _, _ := call(s, "", "GET", "/volumes", ""); st != 401 {
		t.Errorf("no key: %d", st)
	}
}

// content sends a content API request with token and returns the status
// and body.
func content(s *Server, token, method, target string, body []byte) (int, []byte) {
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

// TestVolumeToken: a volume's token opens that volume alone, and no other
// token (a sandbox's, another volume's) opens it.
func TestVolumeToken(t *testing.T) {
	s, _ := newVolumes(t)
	tokens := map[string]string{}
	for _, n := range []string{"a", "b"} {
		_, _, body := call(s, "wr_good", "POST", "/volumes", `{"name":"`+n+`"}`)
		var vt volumeAndToken
		json.Unmarshal(body, &vt)
		tokens[n] = vt.Token
	}
	if st, body := content(s, tokens["a"], "PUT", "/volumecontent/a/file?path=/x", []byte("1")); st != 201 {
		t.Fatalf("own token: %d %s", st, body)
	}
	for name, tok := range map[string]string{
		"b's token":         tokens["b"],
		"a sandbox's token": s.sealToken("a", "wr_good"),
		"the key":           "wr_good",
		"garbage":           tokenPrefix + "AAAA",
		"none":              "",
	} {
		st, body := content(s, tok, "GET", "/volumecontent/a/file?path=/x", nil)
		var e map[string]string
		if st != 401 || json.Unmarshal(body, &e) != nil || e["code"] != "unauthorized" {
			t.Errorf("%s: %d %s, want 401 in the content API's shape", name, st, body)
		}
	}
	// Nor does a volume's token open a sandbox of that id.
	if _, err := s.openToken("a", tokens["a"]); err == nil {
		t.Error("a volume token opened as a sandbox's")
	}
}

func TestVolumeContent(t *testing.T) {
	s, f := newVolumes(t)
	_, _, body := call(s, "wr_good", "POST", "/volumes", `{"name":"data"}`)
	var vt volumeAndToken
	json.Unmarshal(body, &vt)
	do := func(method, target string, body string) (int, []byte) {
		return content(s, vt.Token, method, "/volumecontent/data/"+target, []byte(body))
	}
	stat := func(st int, body []byte) entryStat {
		t.Helper()
		var e entryStat
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("%d %s: %v", st, body, err)
		}
		return e
	}

	st, body := do("PUT", "file?path=/a/b.txt", "hello")
	if e := stat(st, body); st != 201 || e.Path != "/a/b.txt" || e.Name != "b.txt" || e.Type != "file" || e.Size != 5 || e.Mode != 0o644 || e.UID != 1000 || e.MTime.IsZero() {
		t.Errorf("put: %d %s", st, body)
	}
	if st, body := do("GET", "file?path=a/b.txt", ""); st != 200 || string(body) != "hello" {
		t.Errorf("get: %d %q", st, body)
	}
	if st, body := do("PUT", "file?path=/a/b.txt&force=false", "again"); st != 409 {
		t.Errorf("force=false on an existing file: %d %s", st, body)
	}
	if st, _ := do("PUT", "file?path=/a/b.txt&force=true", "again"); st != 201 || string(f.accounts["wr_good"]["data"].files["/a/b.txt"]) != "again" {
		t.Errorf("force=true: %d", st)
	}
	for _, q := range []string{"uid=1000", "gid=1000", "mode=420"} {
		st, body := do("PUT", "file?path=/c.txt&"+q, "x")
		var e map[string]string
		if json.Unmarshal(body, &e); st != 400 || !strings.Contains(e["message"], strings.Split(q, "=")[0]) {
			t.Errorf("put with %s: %d %s, want 400 naming it", q, st, body)
		}
	}
	if _, ok := f.accounts["wr_good"]["data"].files["/c.txt"]; ok {
		t.Error("a refused put wrote the file")
	}
	if st, body := do("GET", "path?path=/a", ""); st != 200 || stat(st, body).Type != "directory" || stat(st, body).Mode != 0o755 {
		t.Errorf("stat of a directory: %d %s", st, body)
	}
	if st, body := do("GET", "path?path=/", ""); st != 200 || stat(st, body).Type != "directory" {
		t.Errorf("stat of the root: %d %s", st, body)
	}
	for _, target := range []string{"path?path=/nope", "file?path=/nope", "dir?path=/nope", "path?path=/a/b.txt/c"} {
		if st, body := do("GET", target, ""); st != 404 {
			t.Errorf("%s: %d %s, want 404", target, st, body)
		}
	}
	if st, body := do("GET", "file?path=/a", ""); st != 400 {
		t.Errorf("a directory read as a file: %d %s", st, body)
	}
	if st, body := do("GET", "path", ""); st != 400 {
		t.Errorf("no path: %d %s", st, body)
	}

	// Directories: made (parents only with force), refused when there.
	if st, body := do("POST", "dir?path=/x/y", ""); st != 404 {
		t.Errorf("mkdir under a missing parent: %d %s", st, body)
	}
	if st, body := do("POST", "dir?path=/x/y&force=true", ""); st != 201 || stat(st, body).Type != "directory" {
		t.Errorf("mkdir with force: %d %s", st, body)
	}
	if st, body := do("POST", "dir?path=/x/y", ""); st != 409 {
		t.Errorf("mkdir of an existing directory: %d %s", st, body)
	}
	if st, body := do("POST", "dir?path=/z&mode=493", ""); st != 400 || !strings.Contains(string(body), "mode") {
		t.Errorf("mkdir with a mode: %d %s", st, body)
	}
	do("PUT", "file?path=/x/y/deep.txt", "d")

	var l []entryStat
	st, body = do("GET", "dir?path=/", "")
	if json.Unmarshal(body, &l); st != 200 || len(l) != 2 {
		t.Errorf("list depth 1: %d %s", st, body)
	}
	st, body = do("GET", "dir?path=/&depth=3", "")
	var paths []string
	json.Unmarshal(body, &l)
	for _, e := range l {
		paths = append(paths, e.Path)
	}
	slices.Sort(paths)
	if st != 200 || strings.Join(paths, " ") != "/a /a/b.txt /x /x/y /x/y/deep.txt" {
		t.Errorf("list depth 3: %d %v", st, paths)
	}
	if st, body := do("GET", "dir?path=/&depth=1000", ""); st != 400 {
		t.Errorf("a depth past the bound: %d %s", st, body)
	}

	// Metadata cannot change: named, after a missing path's 404.
	if st, _ := do("PATCH", "path?path=/nope", `{"mode":420}`); st != 404 {
		t.Errorf("patch of a missing path: %d", st)
	}
	if st, body := do("PATCH", "path?path=/a/b.txt", `{"mode":420}`); st != 400 || !strings.Contains(string(body), "owner or mode") {
		t.Errorf("patch: %d %s", st, body)
	}

	// A directory is removed with what it holds.
	if st, body := do("DELETE", "path?path=/x", ""); st != 204 {
		t.Errorf("remove a directory: %d %s", st, body)
	}
	for p := range f.accounts["wr_good"]["data"].files {
		if strings.HasPrefix(p, "/x") {
			t.Errorf("%s left after its directory's removal", p)
		}
	}
	if st, _ := do("DELETE", "path?path=/x", ""); st != 404 {
		t.Errorf("remove again: %d", st)
	}
	if st, _ := do("DELETE", "path?path=/", ""); st != 400 {
		t.Errorf("remove the root: %d", st)
	}

	// The volume gone, its token's calls say so.
	f.accounts["wr_good"] = map[string]*fakeVolume{}
	st, body = do("GET", "path?path=/a", "")
	var e map[string]string
	if json.Unmarshal(body, &e); st != 404 || !strings.Contains(e["message"], "volume data not found") {
		t.Errorf("a deleted volume: %d %s", st, body)
	}
}

func TestVolumeMountsShown(t *testing.T) {
	s, _ := newVolumes(t)
	st, _, body := call(s, "wr_good", "POST", "/sandboxes", `{"templateID":"base","volumeMounts":[{"name":"data","path":"/mnt/data"}]}`)
	var a sandboxAnswer
	if st != 201 || json.Unmarshal(body, &a) != nil {
		t.Fatalf("create: %d %s", st, body)
	}
	_, _, body = call(s, "wr_good", "GET", "/sandboxes/"+a.SandboxID, "")
	var d sandboxDetail
	json.Unmarshal(body, &d)
	if len(d.VolumeMounts) != 1 || d.VolumeMounts[0] != (volumeMount{Name: "data", Path: "/mnt/data"}) {
		t.Errorf("detail: %s", body)
	}
}
