package e2bcompat

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// controlAPI is a stand-in for withruntime's API: the sandbox routes the
// control plane calls, in memory, for key "wr_good". calls records them.
type controlAPI struct {
	mu    sync.Mutex
	sbx   map[string]*api.Sandbox
	calls []string
	n     int
	// allPublic is what PUT .../previews made of each sandbox.
	allPublic map[string]bool
}

// answering gives a fake API's two ways to answer on w: a JSON value, or
// an error of a code (the code as its message too).
func answering(w http.ResponseWriter) (answer func(int, any), fail func(int, string)) {
	answer = func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	fail = func(status int, code string) {
		answer(status, api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: code}})
	}
	return answer, fail
}

func (f *controlAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	answer, fail := answering(w)
	if r.Header.Get("Authorization") != "Bearer wr_good" {
		fail(401, "unauthorized")
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/v1/sandboxes")
	if path == "" && r.Method == http.MethodPost {
		var req api.CreateSandboxRequest
		json.NewDecoder(r.Body).Decode(&req)
		// The account has one template of its own, team/app.
		tpl := "default"
		switch req.Template {
		case "":
		case "team/app":
			tpl = "team/app:latest"
		default:
			answer(404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no template " + req.Template}})
			return
		}
		f.n++
		sb := &api.Sandbox{ID: "sbx" + strings.Repeat("0", f.n), State: "running", VCPUs: 2, MemoryMiB: 4096, DiskGiB: 10, Template: tpl, Image: tpl,
			Metadata: req.Metadata, Volumes: req.Volumes, CreatedAt: time.Now(), LeaseEndsAt: time.Now().Add(time.Duration(req.TimeoutSeconds) * time.Second)}
		f.sbx[sb.ID] = sb
		answer(201, sb)
		return
	}
	if path == "" && r.Method == http.MethodGet {
		// Every sandbox on the first page, an empty second one.
		var l api.SandboxList
		if r.URL.Query().Get("page_token") == "" {
			for _, sb := range f.sbx {
				l.Sandboxes = append(l.Sandboxes, *sb)
			}
			l.NextPageToken = "p2"
		}
		answer(200, l)
		return
	}
	id, verb, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	sb := f.sbx[id]
	if sb == nil {
		fail(404, "not_found")
		return
	}
	switch r.Method + " " + verb {
	case "GET ":
	case "DELETE ":
		sb.State = "ended"
	case "POST pause":
		sb.State = "paused"
	case "POST resume":
		sb.State = "running"
	case "PUT previews":
		var req api.SetPreviewsRequest
		json.NewDecoder(r.Body).Decode(&req)
		if f.allPublic == nil {
			f.allPublic = map[string]bool{}
		}
		f.allPublic[id] = req.AllPublic
		answer(200, api.PreviewSettings{PublicPorts: []int{}, AllPublic: req.AllPublic})
		return
	case "POST extend":
		var req api.ExtendRequest
		json.NewDecoder(r.Body).Decode(&req)
		if end := time.Now().Add(time.Duration(req.TimeoutSeconds) * time.Second); req.Exact || end.After(sb.LeaseEndsAt) {
			sb.LeaseEndsAt = end
		}
	default:
		fail(404, "not_found")
		return
	}
	answer(200, sb)
}

func newControl(t *testing.T, domain string) (*Server, *controlAPI) {
	t.Helper()
	f := &controlAPI{sbx: map[string]*api.Sandbox{}}
	s, err := New(Config{API: f, Secret: bytes.Repeat([]byte{9}, SecretSize), Domain: domain})
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

// call sends an E2B request with key and returns the status, header and body.
func call(s *Server, key, method, path, body string) (int, http.Header, []byte) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if key != "" {
		r.Header.Set("X-API-KEY", key)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w.Code, w.Header(), w.Body.Bytes()
}

func TestControlCreateAnswer(t *testing.T) {
	for _, domain := range []string{"", "sbx.example.org"} {
		s, _ := newControl(t, domain)
		status, _, body := call(s, "e2b_wr_good", "POST", "/v2/sandboxes", `{"templateID":"code-interpreter-v1","metadata":{},"envVars":{}}`)
		var got map[string]any
		json.Unmarshal(body, &got)
		if status != 201 || got["sandboxID"] != "sbx0" || got["templateID"] != "code-interpreter-v1" || got["clientID"] != clientID || got["envdVersion"] != EnvdVersion {
			t.Fatalf("domain %q: got %d %s, want 201 with the sandbox", domain, status, body)
		}
		// The tokens hold the key (prefix stripped) for this sandbox only.
		for _, field := range []string{"envdAccessToken", "trafficAccessToken"} {
			tok, _ := got[field].(string)
			if key, err := s.openToken("sbx0", tok); err != nil || key != "wr_good" {
				t.Errorf("%s: opens to %q, %v, want wr_good", field, key, err)
			}
		}
		if domain == "" && got["domain"] != nil || domain != "" && got["domain"] != domain {
			t.Errorf("domain %q: got domain %v", domain, got["domain"])
		}
		// Connect again: the same token.
		_, _, again := call(s, "wr_good", "POST", "/v2/sandboxes/sbx0/connect", `{"timeout":10}`)
		var c map[string]any
		json.Unmarshal(again, &c)
		if c["envdAccessToken"] != got["envdAccessToken"] {
			t.Errorf("connect: got token %v, want the create's %v", c["envdAccessToken"], got["envdAccessToken"])
		}
	}
}

func TestControlLifecycle(t *testing.T) {
	s, f := newControl(t, "")
	call(s, "wr_good", "POST", "/sandboxes", `{"templateID":"base","timeout":600}`)
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string // in the body
	}{
		{"POST", "/v2/sandboxes/sbx0/connect", `{"timeout":60}`, 200, `"sandboxID":"sbx0"`},
		{"GET", "/sandboxes/sbx0", ``, 200, `"state":"running"`},
		{"POST", "/sandboxes/sbx0/timeout", `{"timeout":30}`, 204, ``},
		{"POST", "/sandboxes/sbx0/timeout", `{}`, 400, `timeout`},
		{"POST", "/sandboxes/sbx0/pause", ``, 204, ``},
		{"GET", "/sandboxes/sbx0", ``, 200, `"state":"paused"`},
		{"POST", "/sandboxes/sbx0/pause", `{}`, 409, `already paused`},
		{"POST", "/v2/sandboxes/sbx0/connect", `{"timeout":60}`, 201, `"sandboxID":"sbx0"`},
		{"DELETE", "/sandboxes/sbx0", ``, 204, ``},
		{"DELETE", "/sandboxes/sbx0", ``, 404, `ended`},
		{"GET", "/sandboxes/sbx0", ``, 404, `"code":404`},
		{"POST", "/v2/sandboxes/sbx0/connect", `{}`, 404, `"code":404`},
		{"GET", "/sandboxes/nope", ``, 404, `"code":404`},
		{"POST", "/v2/sandboxes", `{"templateID":"nope"}`, 404, `no template nope`},
		// A withruntime template of the account: created from, and
		// reported by its name.
		{"POST", "/v2/sandboxes", `{"templateID":"team/app"}`, 201, `"templateID":"team/app"`},
		{"GET", "/sandboxes/sbx00", ``, 200, `"templateID":"team/app"`},
	} {
		status, _, body := call(s, "wr_good", c.method, c.path, c.body)
		if status != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s %s: got %d %s, want %d with %q", c.method, c.path, c.body, status, body, c.status, c.want)
		}
	}
	// setTimeout shortened the lease: the exact extend.
	if !strings.Contains(strings.Join(f.calls, ","), "POST /v1/sandboxes/sbx0/extend") {
		t.Errorf("calls %v: want an extend", f.calls)
	}
}

func TestControlAuth(t *testing.T) {
	s, _ := newControl(t, "")
	for _, key := range []string{"", "wr_bad"} {
		status, _, body := call(s, key, "GET", "/v2/sandboxes", ``)
		var e errorBody
		if status != 401 || json.Unmarshal(body, &e) != nil || e.Code != 401 {
			t.Errorf("key %q: got %d %s, want an E2B 401", key, status, body)
		}
	}
}

func TestControlListPages(t *testing.T) {
	s, _ := newControl(t, "")
	call(s, "wr_good", "POST", "/v2/sandboxes", `{"templateID":"base"}`)
	status, h, body := call(s, "wr_good", "GET", "/v2/sandboxes?limit=1", ``)
	var l []map[string]any
	if status != 200 || json.Unmarshal(body, &l) != nil || len(l) != 1 || l[0]["state"] != "running" || h.Get("x-next-token") != "p2" {
		t.Fatalf("got %d %s (x-next-token %q), want one sandbox and the next page's token", status, body, h.Get("x-next-token"))
	}
	_, h, _ = call(s, "wr_good", "GET", "/v2/sandboxes?nextToken=p2", ``)
	if h.Get("x-next-token") != "" {
		t.Errorf("last page: got x-next-token %q, want none", h.Get("x-next-token"))
	}
	if status, _, _ := call(s, "wr_good", "GET", "/v2/sandboxes?state=killed", ``); status != 400 {
		t.Errorf("state=killed: got %d, want 400", status)
	}
}
