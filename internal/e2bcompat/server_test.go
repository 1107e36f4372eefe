package e2bcompat

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeAPI answers GET /v1/sandboxes/{id} for key "wr_good": sandbox "run"
// runs, "zzz" is paused, any other is not found.
func fakeAPI() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer wr_good" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"unauthorized","message":"invalid API key"}}`))
			return
		}
		state := map[string]string{"run": "running", "zzz": "paused"}[r.PathValue("id")]
		if state == "" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"code":"not_found","message":"no such sandbox"}}`))
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"id": r.PathValue("id"), "state": state})
	})
	return mux
}

// newTestServer serves a fake envd route that echoes who it acts as.
func newTestServer(t *testing.T, domain string) *Server {
	t.Helper()
	s, err := New(Config{API: fakeAPI(), Secret: bytes.Repeat([]byte{7}, SecretSize), Domain: domain})
	if err != nil {
		t.Fatal(err)
	}
	s.envd.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		sbx, err := s.sandbox(r)
		if err != nil {
			writeError(w, err)
			return
		}
		w.Write([]byte("envd " + sbx.ID + " " + sbx.User))
	})
	s.interpreter.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		sbx, _ := s.sandbox(r)
		w.Write([]byte("interpreter " + sbx.ID + " " + sbx.User))
	})
	return s
}

func TestRouting(t *testing.T) {
	s := newTestServer(t, "sbx.example.org")
	good := s.sealToken("run", "wr_good")
	basicRoot := "Basic " + base64.StdEncoding.EncodeToString([]byte("root:"))
	for _, c := range []struct {
		name    string
		host    string
		path    string
		header  map[string]string
		status  int
		want    string // body substring
		wantE2B bool   // an E2B JSON error with code == status
	}{
		{"envd by header", "localhost", "/whoami", map[string]string{headerSandboxID: "run", headerSandboxPort: EnvdPort, headerAccessToken: good}, 200, "envd run user", false},
		{"port defaults to envd", "localhost", "/whoami", map[string]string{headerSandboxID: "run", headerAccessToken: good}, 200, "envd run user", false},
		{"interpreter by header, traffic token", "localhost", "/whoami", map[string]string{headerSandboxID: "run", headerSandboxPort: InterpreterPort, headerTrafficToken: good}, 200, "interpreter run user", false},
		{"root by Basic", "localhost", "/whoami", map[string]string{headerSandboxID: "run", headerAccessToken: good, "Authorization": basicRoot}, 200, "envd run root", false},
		{"root by username", "localhost", "/whoami?username=root", map[string]string{headerSandboxID: "run", headerAccessToken: good}, 200, "envd run root", false},
		{"unknown user", "localhost", "/whoami?username=bob", map[string]string{headerSandboxID: "run", headerAccessToken: good}, 400, "bob", true},
		{"by host", "49983-run.sbx.example.org:443", "/whoami", map[string]string{headerAccessToken: good}, 200, "envd run user", false},
		{"interpreter by host", "49999-run.SBX.example.org", "/whoami", map[string]string{headerAccessToken: good}, 200, "interpreter run user", false},
		{"another port, no preview URLs", "localhost", "/whoami", map[string]string{headerSandboxID: "run", headerSandboxPort: "8080", headerAccessToken: good}, 502, "is not served", true},
		{"no token", "localhost", "/whoami", map[string]string{headerSandboxID: "run"}, 401, "access token", true},
		{"token of another sandbox", "localhost", "/whoami", map[string]string{headerSandboxID: "other", headerAccessToken: good}, 401, "access token", true},
		{"key as token", "localhost", "/whoami", map[string]string{headerSandboxID: "run", headerAccessToken: "wr_good"}, 401, "access token", true},
		{"revoked key", "localhost", "/whoami", map[string]string{headerSandboxID: "run", headerAccessToken: s.sealToken("run", "wr_gone")}, 401, "", true},
		{"unknown sandbox", "localhost", "/whoami", map[string]string{headerSandboxID: "nope", headerAccessToken: s.sealToken("nope", "wr_good")}, 502, "The sandbox nope was not found", true},
		{"paused sandbox", "localhost", "/whoami", map[string]string{headerSandboxID: "zzz", headerAccessToken: s.sealToken("zzz", "wr_good")}, 502, "The sandbox zzz was not found", true},
		{"control plane", "localhost", "/teams", nil, 501, "does not support GET /teams", true},
		{"host outside the domain", "49983-run.other.org", "/teams", nil, 501, "does not support", true},
	} {
		r := httptest.NewRequest(http.MethodGet, c.path, nil)
		r.Host = c.host
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: got %d %q, want %d with %q", c.name, w.Code, w.Body.String(), c.status, c.want)
			continue
		}
		if c.wantE2B {
			var b errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.Code != c.status || b.Message == "" || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("%s: got body %q (%v), want E2B JSON with code %d", c.name, w.Body.String(), err, c.status)
			}
		}
	}
}
