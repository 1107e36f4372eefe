package e2bcompat

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSandboxAccount: a sandbox-side request's account is the one
// Config.Accounts names for its key; without Accounts each key stands for
// an account of its own; a key Accounts cannot place is refused with 500
// and the store's detail stays in the log.
func TestSandboxAccount(t *testing.T) {
	tests := []struct {
		name       string
		accounts   func(ctx context.Context, key string) (string, error)
		wantStatus int
		wantAcct   string
	}{
		{"the key's account", func(_ context.Context, key string) (string, error) { return "acct-of-" + key, nil }, 200, "acct-of-wr_good"},
		{"no resolver: the key's digest", nil, 200, keyDigest("wr_good")},
		{"the resolver fails", func(context.Context, string) (string, error) { return "", errors.New("store down at 10.0.0.7") }, 500, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Config{API: fakeAPI(), Secret: bytes.Repeat([]byte{7}, SecretSize), Accounts: tt.accounts})
			if err != nil {
				t.Fatal(err)
			}
			var got string
			s.envd.HandleFunc("/acct", func(w http.ResponseWriter, r *http.Request) {
				sb, _ := s.sandbox(r)
				got = sb.acct
			})
			req := httptest.NewRequest(http.MethodGet, "/acct", nil)
			req.Header.Set(headerSandboxID, "run")
			req.Header.Set(headerAccessToken, s.sealToken("run", "wr_good"))
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			if w.Code != tt.wantStatus || got != tt.wantAcct {
				t.Errorf("got %d, account %q, want %d, %q", w.Code, got, tt.wantStatus, tt.wantAcct)
			}
			if strings.Contains(w.Body.String(), "10.0.0.7") {
				t.Errorf("the answer shows the store's error: %s", w.Body)
			}
		})
	}
}
