package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

func withHooks(c *Config) {
	c.Hooks = c.Store.(*store.Bolt)
	c.CheckWebhookURL = func(_ context.Context, u string) error {
		if strings.Contains(u, "127.0.0.1") {
			return sandbox.Errorf(sandbox.KindInvalid, "webhook url: loopback")
		}
		return nil
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWebhookRoutes: a full key registers a webhook and sees its secret
// once; the list never shows it; read-only keys only read; another
// account neither sees nor removes it; bad events and URLs are refused.
func TestWebhookRoutes(t *testing.T) {
	e := newEnv(t, withHooks)
	full, ro, admin := e.keys[store.KeyFull], e.keys[store.KeyReadOnly], e.keys[store.KeyAdmin]

	resp := e.doJSON("POST", "/v1/webhooks", full, `{"url":"https://hooks.example.test/in","events":["sandbox.created","sandbox.ended","sandbox.created"]}`)
	b := readBody(t, resp)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	var wh api.Webhook
	if err := json.Unmarshal([]byte(b), &wh); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(wh.ID, "wh_") || !strings.HasPrefix(wh.Secret, "whsec_") || len(wh.Events) != 2 || wh.URL != "https://hooks.example.test/in" {
		t.Fatalf("POST: got %+v", wh)
	}
	for _, key := range []string{full, ro} {
		resp = e.do("GET", "/v1/webhooks", key, nil)
		b = readBody(t, resp)
		if resp.StatusCode != http.StatusOK || !strings.Contains(b, wh.ID) || strings.Contains(b, "whsec_") || strings.Contains(b, wh.Secret) {
			t.Fatalf("GET: %d %s: want the webhook without its secret", resp.StatusCode, b)
		}
	}
	for _, c := range []struct {
		key, body string
		code      int
	}{
		{ro, `{"url":"https://hooks.example.test/","events":["sandbox.created"]}`, http.StatusForbidden},
		{full, `{"url":"https://hooks.example.test/","events":["sandbox.exploded"]}`, http.StatusBadRequest},
		{full, `{"url":"https://hooks.example.test/","events":[]}`, http.StatusBadRequest},
		{full, `{"url":"http://127.0.0.1:9/","events":["sandbox.created"]}`, http.StatusBadRequest},
	} {
		resp = e.doJSON("POST", "/v1/webhooks", c.key, c.body)
		if b := readBody(t, resp); resp.StatusCode != c.code {
			t.Errorf("POST %s: %d %s, want %d", c.body, resp.StatusCode, b, c.code)
		}
	}
	resp = e.do("GET", "/v1/webhooks", admin, nil)
	if b := readBody(t, resp); strings.Contains(b, wh.ID) {
		t.Errorf("another account sees the webhook: %s", b)
	}
	for _, c := range []struct {
		key  string
		code int
	}{{admin, http.StatusNotFound}, {ro, http.StatusForbidden}, {full, http.StatusNoContent}, {full, http.StatusNotFound}} {
		resp = e.do("DELETE", "/v1/webhooks/"+wh.ID, c.key, nil)
		if b := readBody(t, resp); resp.StatusCode != c.code {
			t.Errorf("DELETE: %d %s, want %d", resp.StatusCode, b, c.code)
		}
	}
	// The bound per account, which holds newEnv's webhook already.
	for i := 1; i <= api.MaxWebhooksPerAccount; i++ {
		resp = e.doJSON("POST", "/v1/webhooks", full, `{"url":"https://hooks.example.test/","events":["template.built"]}`)
		want := http.StatusCreated
		if i == api.MaxWebhooksPerAccount {
			// The 21st.
			want = http.StatusForbidden
		}
		if b := readBody(t, resp); resp.StatusCode != want {
			t.Fatalf("webhook %d: %d %s, want %d", i+1, resp.StatusCode, b, want)
		}
	}
}

// TestAuditLog: each change is recorded with its key, action, target and
// client address; reads and refused changes are not; only the admin key
// reads the log; a secret's value never appears in it.
func TestAuditLog(t *testing.T) {
	e := newEnv(t, withHooks)
	full, ro, admin := e.keys[store.KeyFull], e.keys[store.KeyReadOnly], e.keys[store.KeyAdmin]
	steps := []struct {
		method, path, key, body string
	}{
		{"POST", "/v1/sandboxes/sbx-1/pause", full, ""},
		{"POST", "/v1/sandboxes/sbx-1/resume", full, ""},
		{"GET", "/v1/sandboxes/sbx-1", full, ""},     // a read: not recorded
		{"POST", "/v1/sandboxes/sbx-1/stop", ro, ""}, // refused: not recorded
		{"PUT", "/v1/secrets/AUDITED", full, `{"value":"` + newValue + `","host":"api.example.org"}`},
		{"DELETE", "/v1/secrets/AUDITED", full, ""},
		{"PUT", "/v1/sandboxes/sbx-1/network", full, `{"internet":true}`},
		{"POST", "/v1/keys", full, `{"kind":"read_only"}`},
		{"POST", "/v1/sandboxes/sbx-1/stop", full, ""},
	}
	for _, s := range steps {
		var resp *http.Response
		if s.body != "" {
			resp = e.doJSON(s.method, s.path, s.key, s.body)
		} else {
			resp = e.do(s.method, s.path, s.key, nil)
		}
		readBody(t, resp)
	}
	for _, key := range []string{full, ro} {
		resp := e.do("GET", "/v1/audit", key, nil)
		if b := readBody(t, resp); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET /v1/audit with a non-admin key: %d %s, want 403", resp.StatusCode, b)
		}
	}
	resp := e.do("GET", "/v1/audit?limit=1000", admin, nil)
	b := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/audit: %d %s", resp.StatusCode, b)
	}
	if strings.Contains(b, newValue) {
		t.Fatalf("the audit log holds a secret's value: %s", b)
	}
	var log api.AuditLog
	if err := json.Unmarshal([]byte(b), &log); err != nil {
		t.Fatal(err)
	}
	want := []string{"sandbox.pause sbx-1", "sandbox.resume sbx-1", "secret.set AUDITED", "secret.delete AUDITED", "sandbox.network_set sbx-1", "key.create ", "sandbox.stop sbx-1"}
	if len(log.Entries) != len(want) {
		t.Fatalf("audit entries: %+v, want %v", log.Entries, want)
	}
	for i, a := range log.Entries {
		got := a.Action + " " + a.Target
		if a.Action == "key.create" {
			got = a.Action + " "
			if a.Target == "" {
				t.Errorf("key.create names no key: %+v", a)
			}
		}
		if got != want[i] {
			t.Errorf("entry %d: %q, want %q", i, got, want[i])
		}
		if a.Account != "acct1" || a.KeyID != "key-1" || a.Remote != "127.0.0.1" || a.At.IsZero() || a.Seq == 0 {
			t.Errorf("entry %d: %+v, want account acct1, key key-1 from 127.0.0.1", i, a)
		}
	}
	resp = e.do("GET", "/v1/audit?since=2999-01-01T00:00:00Z", admin, nil)
	if b := readBody(t, resp); !strings.Contains(b, `"entries":[]`) {
		t.Errorf("since the future: %s", b)
	}
	for _, q := range []string{"?since=yesterday", "?limit=0", "?limit=1001"} {
		resp = e.do("GET", "/v1/audit"+q, admin, nil)
		if b := readBody(t, resp); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /v1/audit%s: %d %s, want 400", q, resp.StatusCode, b)
		}
	}
}
