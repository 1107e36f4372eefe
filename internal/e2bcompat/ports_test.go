package e2bcompat

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPortRouting: a request for a port other than envd's goes to
// Config.Preview with the traffic token's key as Authorization and none
// of E2B's routing headers; a bad token is refused before it.
func TestPortRouting(t *testing.T) {
	type got struct {
		id   string
		port int
		h    http.Header
		host string
	}
	var calls []got
	s, err := New(Config{
		API: http.NotFoundHandler(), Secret: bytes.Repeat([]byte{9}, SecretSize), Domain: "e2b.test",
		Preview: func(w http.ResponseWriter, r *http.Request, id string, port int) {
			calls = append(calls, got{id, port, r.Header.Clone(), r.Host})
			w.WriteHeader(http.StatusTeapot)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tok := s.sealToken("sbxa", "wr_key")
	for _, tc := range []struct {
		name   string
		host   string
		header map[string]string
		status int
		auth   string
	}{
		{"host form, token", "8000-sbxa.e2b.test", map[string]string{headerTrafficToken: tok}, 418, "Bearer wr_key"},
		{"host form, no token", "8000-sbxa.e2b.test", nil, 418, ""},
		{"headers", "localhost", map[string]string{headerSandboxID: "sbxa", headerSandboxPort: "8000", headerTrafficToken: tok}, 418, "Bearer wr_key"},
		{"another sandbox's token", "8000-sbxb.e2b.test", map[string]string{headerTrafficToken: tok}, 401, ""},
		{"a forged Authorization", "8000-sbxa.e2b.test", map[string]string{"Authorization": "Bearer wr_other"}, 418, ""},
		{"bad port", "80x-sbxa.e2b.test", nil, 400, ""},
	} {
		calls = nil
		r := httptest.NewRequest(http.MethodGet, "/path?q=1", nil)
		r.Host = tc.host
		for k, v := range tc.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("%s: got %d %s, want %d", tc.name, w.Code, w.Body, tc.status)
			continue
		}
		if tc.status != 418 {
			if len(calls) != 0 {
				t.Errorf("%s: the preview was reached", tc.name)
			}
			continue
		}
		c := calls[0]
		if c.id != "sbxa" || c.port != 8000 || c.h.Get("Authorization") != tc.auth {
			t.Errorf("%s: preview of %s:%d with Authorization %q, want sbxa:8000 with %q", tc.name, c.id, c.port, c.h.Get("Authorization"), tc.auth)
		}
		for _, h := range []string{headerSandboxID, headerSandboxPort, headerTrafficToken, headerAccessToken} {
			if c.h.Get(h) != "" {
				t.Errorf("%s: %s passed on", tc.name, h)
			}
		}
	}
}

// TestCreatePublicTraffic: an E2B create makes every port public unless
// network.allowPublicTraffic is false.
func TestCreatePublicTraffic(t *testing.T) {
	s, f := newControl(t, "")
	for _, tc := range []struct {
		body   string
		public bool
	}{
		{`{"templateID":"base"}`, true},
		{`{"templateID":"base","network":{"allowPublicTraffic":true}}`, true},
		{`{"templateID":"base","network":{"allowPublicTraffic":false}}`, false},
	} {
		code, _, body := call(s, "e2b_wr_good", http.MethodPost, "/sandboxes", tc.body)
		if code != http.StatusCreated {
			t.Fatalf("%s: %d %s", tc.body, code, body)
		}
		id := f.sbxIDOf(string(body))
		if got, asked := f.allPublic[id]; got != tc.public || (!tc.public && asked) {
			t.Errorf("%s: all_public %v (asked %v), want %v", tc.body, got, asked, tc.public)
		}
	}
}

// sbxIDOf reads the sandboxID of a create's answer.
func (f *controlAPI) sbxIDOf(body string) string {
	_, rest, _ := strings.Cut(body, `"sandboxID":"`)
	id, _, _ := strings.Cut(rest, `"`)
	return id
}
