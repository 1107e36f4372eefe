package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/store"
)

// newValue is a value no env starts with.
const newValue = "sk-new-77aa01c4e9d35b28"

func TestSecretsRoutes(t *testing.T) {
	e := newEnv(t, nil)
	full, ro := e.keys[store.KeyFull], e.keys[store.KeyReadOnly]
	var bodies strings.Builder // every answer, searched for values at the end
	read := func(resp *http.Response) []byte {
		t.Helper()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		bodies.Write(b)
		return b
	}

	resp := e.doJSON("PUT", "/v1/secrets/OPENAI_API_KEY", full, `{"value":"`+newValue+`","host":"API.OpenAI.com"}`)
	b := read(resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: got %d %s, want 200", resp.StatusCode, b)
	}
	var info api.SecretInfo
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info.Name != "OPENAI_API_KEY" || info.Host != "api.openai.com" || info.UpdatedAt.IsZero() {
		t.Errorf("PUT: got %+v", info)
	}

	for _, key := range []string{full, ro} {
		resp = e.do("GET", "/v1/secrets", key, nil)
		b = read(resp)
		var list api.SecretList
		if err := json.Unmarshal(b, &list); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET: %d %s (%v)", resp.StatusCode, b, err)
		}
		if len(list.Secrets) != 2 || list.Secrets[0].Name != "OPENAI_API_KEY" || list.Secrets[1].Name != testSecretName {
			t.Errorf("GET: got %+v, want OPENAI_API_KEY and %s", list.Secrets, testSecretName)
		}
	}

	// Another account sees none of them, and cannot remove them.
	resp = e.do("GET", "/v1/secrets", e.keys[store.KeyAdmin], nil)
	if b = read(resp); strings.Contains(string(b), "OPENAI_API_KEY") || !strings.Contains(string(b), `"secrets":[]`) {
		t.Errorf("another account's list: %s", b)
	}
	resp = e.do("DELETE", "/v1/secrets/OPENAI_API_KEY", e.keys[store.KeyAdmin], nil)
	if read(resp); resp.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE by another account: got %d, want 404", resp.StatusCode)
	}

	// A read-only key changes nothing.
	resp = e.doJSON("PUT", "/v1/secrets/OPENAI_API_KEY", ro, `{"value":"x","host":"evil.example"}`)
	if read(resp); resp.StatusCode != http.StatusForbidden {
		t.Errorf("PUT with a read-only key: got %d, want 403", resp.StatusCode)
	}
	resp = e.do("DELETE", "/v1/secrets/OPENAI_API_KEY", ro, nil)
	if read(resp); resp.StatusCode != http.StatusForbidden {
		t.Errorf("DELETE with a read-only key: got %d, want 403", resp.StatusCode)
	}

	resp = e.do("DELETE", "/v1/secrets/OPENAI_API_KEY", full, nil)
	if read(resp); resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: got %d, want 204", resp.StatusCode)
	}
	resp = e.do("DELETE", "/v1/secrets/OPENAI_API_KEY", full, nil)
	if read(resp); resp.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE again: got %d, want 404", resp.StatusCode)
	}

	for _, v := range []string{newValue, testSecretValue} {
		if strings.Contains(bodies.String(), v) {
			t.Errorf("an answer holds a value: %s", bodies.String())
		}
		if strings.Contains(e.logs.String(), v) {
			t.Errorf("the log holds a value:\n%s", e.logs.String())
		}
	}
}

func TestSecretsRefused(t *testing.T) {
	e := newEnv(t, nil)
	full := e.keys[store.KeyFull]
	tests := []struct {
		name, path, body string
		wantStatus       int
		wantMsg          string
	}{
		{"bad name", "/v1/secrets/sk-" + newValue, `{"value":"v","host":"api.example.org"}`, 400, "environment variable name"},
		{"reserved name", "/v1/secrets/PATH", `{"value":"v","host":"api.example.org"}`, 400, "PATH is set"},
		{"IP host", "/v1/secrets/K", `{"value":"v","host":"10.0.0.1"}`, 400, "not an IP address"},
		{"host with port", "/v1/secrets/K", `{"value":"v","host":"api.example.org:443"}`, 400, "without a port"},
		{"no host", "/v1/secrets/K", `{"value":"v"}`, 400, "host is required"},
		{"empty value", "/v1/secrets/K", `{"value":"","host":"api.example.org"}`, 400, "value is empty"},
		{"value with newline", "/v1/secrets/K", `{"value":"` + newValue + `\n","host":"api.example.org"}`, 400, "line break"},
		{"value with NUL", "/v1/secrets/K", `{"value":"` + newValue + `\u0000","host":"api.example.org"}`, 400, "JSON object"},
		{"malformed JSON", "/v1/secrets/K", `{"value":"` + newValue + `\q"}`, 400, "JSON object"},
		{"value not a string", "/v1/secrets/K", `{"value":12345,"host":"api.example.org"}`, 400, "JSON object"},
		{"unknown field", "/v1/secrets/K", `{"value":"v","host":"api.example.org","name":"K"}`, 400, "JSON object"},
		{"empty body", "/v1/secrets/K", ``, 400, "JSON object"},
		{"too large", "/v1/secrets/K", `{"value":"` + strings.Repeat("v", 2<<20) + `","host":"a.example"}`, 413, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.doJSON("PUT", tt.path, full, tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status: got %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			d := errorOf(t, resp)
			if !strings.Contains(d.Message, tt.wantMsg) {
				t.Errorf("message: got %q, want it to say %q", d.Message, tt.wantMsg)
			}
			if strings.Contains(d.Message, newValue) {
				t.Errorf("message holds the value: %q", d.Message)
			}
		})
	}
	if strings.Contains(e.logs.String(), newValue[3:]) {
		t.Errorf("the log holds the value:\n%s", e.logs.String())
	}
	if list, _ := e.vault.List(t.Context(), "acct1"); len(list) != 1 {
		t.Errorf("refused secrets were stored: %+v", list)
	}
}

func TestSecretsNotConfigured(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Secrets = nil })
	for _, r := range []struct{ method, path, body string }{
		{"PUT", "/v1/secrets/K", `{"value":"v","host":"a.example"}`},
		{"GET", "/v1/secrets", ``},
		{"DELETE", "/v1/secrets/K", ``},
	} {
		resp := e.doJSON(r.method, r.path, e.keys[store.KeyFull], r.body)
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s %s: got %d, want 422", r.method, r.path, resp.StatusCode)
		}
		if d := errorOf(t, resp); d.Code != "not_supported" {
			t.Errorf("%s %s: code %q, want not_supported", r.method, r.path, d.Code)
		}
	}
	// Commands still run, without placeholders.
	resp := e.doJSON("POST", "/v1/sandboxes/sbx-1/exec", e.keys[store.KeyFull], `{"cmd":"env","env":{"A":"1"}}`)
	io.Copy(io.Discard, resp.Body)
	if got := execEnv(t, e, 0); len(got) != 1 || got["A"] != "1" {
		t.Errorf("exec env: got %v, want A only", got)
	}
}

// execEnv is the environment of the n-th exec the agent got.
func execEnv(t *testing.T, e *testEnv, n int) map[string]string {
	t.Helper()
	var execs []agentRequest
	for _, r := range e.agent.requests() {
		if r.Path == "/exec" {
			execs = append(execs, r)
		}
	}
	if len(execs) <= n {
		t.Fatalf("the agent got %d execs, want at least %d", len(execs), n+1)
	}
	var req api.ExecRequest
	if err := json.Unmarshal(execs[n].Body, &req); err != nil {
		t.Fatal(err)
	}
	return req.Env
}

func TestExecGetsPlaceholders(t *testing.T) {
	e := newEnv(t, nil)
	full := e.keys[store.KeyFull]
	ctx := t.Context()
	exec := func(body string) {
		t.Helper()
		resp := e.doJSON("POST", "/v1/sandboxes/sbx-1/exec", full, body)
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("exec: got %d", resp.StatusCode)
		}
	}
	seeded := e.vault.Placeholder("acct1", testSecretName)

	exec(`{"cmd":"env"}`)
	if got := execEnv(t, e, 0); len(got) != 1 || got[testSecretName] != seeded {
		t.Errorf("exec 0: got %v, want %s=%s", got, testSecretName, seeded)
	}

	// A name the request sets itself keeps its value.
	exec(`{"cmd":"env","env":{"` + testSecretName + `":"mine","B":"2"}}`)
	if got := execEnv(t, e, 1); got[testSecretName] != "mine" || got["B"] != "2" {
		t.Errorf("exec 1: got %v, want the request's own value", got)
	}

	// Each command sees the secrets as they are when it starts: a new
	// secret appears, a rotated one keeps its placeholder, a removed one
	// is gone. Background commands too.
	if _, err := e.vault.Set(ctx, "acct1", "GH_TOKEN", "*.github.com", newValue); err != nil {
		t.Fatal(err)
	}
	if _, err := e.vault.Set(ctx, "acct1", testSecretName, "api.example.org", "rotated"); err != nil {
		t.Fatal(err)
	}
	exec(`{"cmd":"sleep 1","background":true}`)
	got := execEnv(t, e, 2)
	if len(got) != 2 || got[testSecretName] != seeded || got["GH_TOKEN"] != e.vault.Placeholder("acct1", "GH_TOKEN") {
		t.Errorf("background exec: got %v, want both placeholders", got)
	}
	if err := e.vault.Delete(ctx, "acct1", testSecretName); err != nil {
		t.Fatal(err)
	}
	exec(`{"cmd":"env"}`)
	if got := execEnv(t, e, 3); len(got) != 1 || got[testSecretName] != "" {
		t.Errorf("after delete: got %v, want GH_TOKEN only", got)
	}

	// Another account's sandbox gets none of acct1's.
	resp := e.doJSON("POST", "/v1/sandboxes/sbx-admin/exec", e.keys[store.KeyAdmin], `{"cmd":"env"}`)
	io.Copy(io.Discard, resp.Body)
	if got := execEnv(t, e, 4); len(got) != 0 {
		t.Errorf("another account's exec: got %v, want no placeholders", got)
	}

	for _, r := range e.agent.requests() {
		for _, v := range []string{testSecretValue, newValue, "rotated"} {
			if strings.Contains(string(r.Body), v) {
				t.Errorf("the agent got a secret's value: %s", r.Body)
			}
		}
	}
}
