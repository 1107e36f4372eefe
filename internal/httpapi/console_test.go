package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/withruntime/withruntime/internal/console"
)

// The console is served without a key, as the server mounts it in front
// of the API, and serving it changes nothing of the API: every route but
// the public ones still answers 401 without a key, with no console header.
func TestConsoleBesideTheAPI(t *testing.T) {
	e := newEnv(t, nil)
	srv := httptest.NewServer(console.Mount(e.handler))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") != console.CSP || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("/console/ without a key: %d %v, want 200 with the console's headers", resp.StatusCode, resp.Header)
	}
	for _, rt := range Routes() {
		if rt.Public {
			continue
		}
		req, _ := http.NewRequestWithContext(t.Context(), rt.Method, srv.URL+concrete(rt.Pattern), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s without a key beside the console: %d, want 401", rt.Method, rt.Pattern, resp.StatusCode)
		}
		if resp.Header.Get("Content-Security-Policy") != "" {
			t.Errorf("%s %s carries the console's headers", rt.Method, rt.Pattern)
		}
	}
}
