package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/store"
)

// chunked hides a reader's length, so the server cannot refuse it from
// Content-Length alone.
type chunked struct{ io.Reader }

func TestBadRequests(t *testing.T) {
	const limit = 1024
	e := newEnv(t, func(c *Config) { c.MaxBodyBytes = limit })
	big := `{"env":{"A":"` + strings.Repeat("x", limit) + `"}}`
	tests := []struct {
		name       string
		method     string
		path       string
		body       io.Reader
		wantStatus int
		wantMsg    string // a part of the message
	}{
		{"truncated", "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":`), 400, "malformed JSON"},
		{"syntax", "POST", "/v1/sandboxes", strings.NewReader(`{vcpus: 1}`), 400, "malformed JSON at byte 2"},
		{"unknown field", "POST", "/v1/sandboxes", strings.NewReader(`{"cpus":2}`), 400, `unknown field "cpus"`},
		{"unknown nested field", "POST", "/v1/sandboxes", strings.NewReader(`{"network":{"internet":false,"proxy":"x"}}`), 400, `unknown field "proxy"`},
		{"trailing value", "POST", "/v1/sandboxes", strings.NewReader(`{} {}`), 400, "after the JSON value"},
		{"trailing garbage", "POST", "/v1/sandboxes", strings.NewReader(`{}x`), 400, "after the JSON value"},
		{"wrong type", "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":"two"}`), 400, "field vcpus must be an integer, not string"},
		{"wrong nested type", "POST", "/v1/sandboxes", strings.NewReader(`{"network":{"internet":"yes"}}`), 400, "field network.internet must be a boolean"},
		{"not an object", "POST", "/v1/sandboxes", strings.NewReader(`[1]`), 400, "request body must be an object, not array"},
		{"too large", "POST", "/v1/sandboxes", strings.NewReader(big), 413, "larger than 1024 bytes"},
		{"too large, chunked", "POST", "/v1/sandboxes", chunked{strings.NewReader(big)}, 413, "larger than 1024 bytes"},
		{"too large after the value", "POST", "/v1/sandboxes", chunked{strings.NewReader(`{}` + strings.Repeat(" ", limit))}, 413, "larger than"},
		{"NUL in env value", "POST", "/v1/sandboxes", strings.NewReader(`{"env":{"A":"x\u0000y"}}`), 400, `env["A"] contains a NUL byte`},
		{"NUL in env key", "POST", "/v1/sandboxes", strings.NewReader(`{"env":{"A\u0000":"x"}}`), 400, "env key contains a NUL byte"},
		{"NUL in image", "POST", "/v1/sandboxes", strings.NewReader(`{"image":"\u0000"}`), 400, "image contains a NUL byte"},
		{"NUL in allow", "POST", "/v1/sandboxes", strings.NewReader(`{"network":{"internet":true,"allow":["a","b\u0000"]}}`), 400, "network.allow[1] contains a NUL byte"},

		{"exec empty body", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(``), 400, "request body is empty"},
		{"exec without cmd", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{}`), 400, "cmd is required"},
		{"exec empty shell cmd", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":""}`), 400, "cmd is required"},
		{"exec empty argv", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":[]}`), 400, "cmd is required"},
		{"exec empty argv[0]", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":["","x"]}`), 400, "cmd is required"},
		{"exec cmd of the wrong type", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":5}`), 400, "cmd must be a string or an array of strings"},
		{"exec argv of the wrong type", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":[1]}`), 400, "must be a string"},
		{"exec negative timeout", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":"ls","timeout_ms":-1}`), 400, "timeout_ms must not be negative"},
		{"exec NUL in argv", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":["ls","a\u0000"]}`), 400, "cmd[1] contains a NUL byte"},
		{"exec NUL in shell cmd", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":"ls\u0000"}`), 400, "cmd contains a NUL byte"},
		{"exec NUL in cwd", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":"ls","cwd":"/tmp\u0000"}`), 400, "cwd contains a NUL byte"},
		{"exec NUL in stdin", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":"cat","stdin":"\u0000"}`), 400, "stdin contains a NUL byte"},
		{"exec unknown field", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":"ls","shell":true}`), 400, `unknown field "shell"`},
		{"exec too large", "POST", "/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":"cat","stdin":"` + strings.Repeat("x", limit) + `"}`), 413, "larger than"},

		{"extend empty body", "POST", "/v1/sandboxes/sbx-1/extend", strings.NewReader(``), 400, "request body is empty"},
		{"extend zero", "POST", "/v1/sandboxes/sbx-1/extend", strings.NewReader(`{"timeout_seconds":0}`), 400, "timeout_seconds must be a positive"},
		{"extend negative", "POST", "/v1/sandboxes/sbx-1/extend", strings.NewReader(`{"timeout_seconds":-5}`), 400, "timeout_seconds must be a positive"},
		{"extend huge", "POST", "/v1/sandboxes/sbx-1/extend", strings.NewReader(`{"timeout_seconds":9223372036854775807}`), 400, "too large"},
		{"extend float", "POST", "/v1/sandboxes/sbx-1/extend", strings.NewReader(`{"timeout_seconds":1.5}`), 400, "field timeout_seconds must be an integer"},

		{"NUL in query", "GET", "/v1/sandboxes/sbx-1/files?path=a%00b", nil, 400, "query parameter path contains a NUL byte"},
		{"malformed query", "GET", "/v1/sandboxes/sbx-1/files?path=%zz", nil, 400, "malformed query"},
		{"NUL in sandbox id", "GET", "/v1/sandboxes/sbx%00/files?path=a", nil, 400, "id contains a NUL byte"},
		{"pid not a number", "GET", "/v1/sandboxes/sbx-1/processes/abc", nil, 400, "pid must be a positive integer"},
		{"pid zero", "POST", "/v1/sandboxes/sbx-1/processes/0/kill", nil, 400, "pid must be a positive integer"},
		{"agent route body too large", "POST", "/v1/sandboxes/sbx-1/files/mkdir?path=d", strings.NewReader(big), 413, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, reqs := len(e.fake.callLog()), len(e.agent.requests())
			resp := e.do(tt.method, tt.path, e.keys[store.KeyFull], tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status: got %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			d := errorOf(t, resp)
			if want := map[int]string{400: "invalid_request", 413: "payload_too_large"}[tt.wantStatus]; d.Code != want {
				t.Errorf("code: got %q, want %q", d.Code, want)
			}
			if !strings.Contains(d.Message, tt.wantMsg) {
				t.Errorf("message: got %q, want it to contain %q", d.Message, tt.wantMsg)
			}
			if got := e.fake.callLog()[calls:]; len(got) != 0 {
				t.Errorf("the manager was called for a bad request: %v", got)
			}
			if got := e.agent.requests()[reqs:]; len(got) != 0 {
				t.Errorf("the agent was reached for a bad request: %v", got)
			}
		})
	}
}

func TestBodyLimitDefault(t *testing.T) {
	e := newEnv(t, nil)
	body := `{"metadata":{"a":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}}`
	resp := e.do(http.MethodPost, "/v1/sandboxes", e.keys[store.KeyFull], strings.NewReader(body))
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status: got %d, want 413", resp.StatusCode)
	}
	// Just under the limit is fine.
	body = `{"metadata":{"a":"` + strings.Repeat("x", DefaultMaxBodyBytes-100) + `"}}`
	resp = e.do(http.MethodPost, "/v1/sandboxes", e.keys[store.KeyFull], strings.NewReader(body))
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("status: got %d, want 201", resp.StatusCode)
	}
}
