package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

func TestAPIErrors(t *testing.T) {
	s := testenv.StartServer(t)
	// One live and one ended sandbox to aim at.
	status, body := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":1024}`))
	var live api.Sandbox
	if status != http.StatusCreated || json.Unmarshal(body, &live) != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+live.ID, nil) })
	_, body = call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":1024}`))
	var ended api.Sandbox
	json.Unmarshal(body, &ended)
	call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+ended.ID, nil)

	big := `{"metadata":{"k":"` + strings.Repeat("x", 2<<20) + `"}}`
	tests := []struct {
		name, key, method, path, body string
		wantStatus                    int
		wantCode                      string
	}{
		{"no key", "", "GET", "/v1/sandboxes", "", 401, "unauthorized"},
		{"wrong key", "wr_nope", "GET", "/v1/sandboxes", "", 401, "unauthorized"},
		{"malformed JSON", s.Key, "POST", "/v1/sandboxes", `{"vcpus":`, 400, "invalid_request"},
		{"unknown field", s.Key, "POST", "/v1/sandboxes", `{"vcpu":2}`, 400, "invalid_request"},
		{"trailing data", s.Key, "POST", "/v1/sandboxes", `{} {}`, 400, "invalid_request"},
		{"vcpus too many", s.Key, "POST", "/v1/sandboxes", `{"vcpus":9}`, 400, "invalid_request"},
		{"memory too small", s.Key, "POST", "/v1/sandboxes", `{"memory_mib":100}`, 400, "invalid_request"},
		{"lease too long", s.Key, "POST", "/v1/sandboxes", `{"timeout_seconds":999999}`, 400, "invalid_request"},
		{"bad on_lease_end", s.Key, "POST", "/v1/sandboxes", `{"on_lease_end":"explode"}`, 400, "invalid_request"},
		{"unknown template", s.Key, "POST", "/v1/sandboxes", `{"image":"ubuntu"}`, 404, "not_found"},
		{"a template name of the wrong shape", s.Key, "POST", "/v1/sandboxes", `{"template":"Ubuntu Latest"}`, 400, "invalid_request"},
		{"NUL in env", s.Key, "POST", "/v1/sandboxes", `{"env":{"A":"x\u0000y"}}`, 400, "invalid_request"},
		{"an allow list without internet", s.Key, "POST", "/v1/sandboxes", `{"network":{"allow":["a.example.test"]}}`, 400, "invalid_request"},
		{"an address with a port in the allow list", s.Key, "POST", "/v1/sandboxes", `{"network":{"internet":true,"allow":["198.18.0.1:80"]}}`, 400, "invalid_request"},
		{"lease could cost more than max_cost_micros", s.Key, "POST", "/v1/sandboxes", `{"max_cost_micros":5}`, 402, "max_cost_exceeded"},
		{"negative max_cost_micros", s.Key, "POST", "/v1/sandboxes", `{"max_cost_micros":-1}`, 400, "invalid_request"},
		{"oversize body", s.Key, "POST", "/v1/sandboxes", big, 413, "payload_too_large"},
		{"unknown sandbox", s.Key, "GET", "/v1/sandboxes/sbx0000000000000000", "", 404, "not_found"},
		{"empty argv", s.Key, "POST", "/v1/sandboxes/" + live.ID + "/exec", `{"cmd":[]}`, 400, "invalid_request"},
		{"NUL in argv", s.Key, "POST", "/v1/sandboxes/" + live.ID + "/exec", `{"cmd":["echo","a\u0000"]}`, 400, "invalid_request"},
		{"path climbs out", s.Key, "GET", "/v1/sandboxes/" + live.ID + "/files?path=../../etc/passwd", "", 400, "invalid_request"},
		{"exec on an ended sandbox", s.Key, "POST", "/v1/sandboxes/" + ended.ID + "/exec", `{"cmd":["true"]}`, 409, "conflict"},
		{"extend an ended sandbox", s.Key, "POST", "/v1/sandboxes/" + ended.ID + "/extend", `{"timeout_seconds":60}`, 409, "conflict"},
		{"resume a running sandbox", s.Key, "POST", "/v1/sandboxes/" + live.ID + "/resume", "", 409, "conflict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body *bytes.Reader
			if tt.body != "" {
				body = bytes.NewReader([]byte(tt.body))
			}
			var status int
			var got []byte
			if body != nil {
				status, got = call(t, s, tt.key, tt.method, tt.path, body)
			} else {
				status, got = call(t, s, tt.key, tt.method, tt.path, nil)
			}
			if status != tt.wantStatus || errorCode(got) != tt.wantCode {
				t.Fatalf("got %d %s, want %d %s", status, got, tt.wantStatus, tt.wantCode)
			}
		})
	}
	// Nothing a refused create asked for was made.
	_, body = call(t, s, s.Key, "GET", "/v1/sandboxes", nil)
	var list api.SandboxList
	json.Unmarshal(body, &list)
	if len(list.Sandboxes) != 2 {
		t.Fatalf("got %d sandboxes after the refused creates, want the 2 made on purpose", len(list.Sandboxes))
	}
	dirs, _ := os.ReadDir(filepath.Join(s.DataDir, "sandboxes"))
	if len(dirs) != 1 {
		t.Fatalf("got %d sandbox state dirs, want only the live one's", len(dirs))
	}
}

func TestCapacityExhausted(t *testing.T) {
	// Half the host's CPUs may be handed out: one 1-vCPU sandbox fits on a
	// 2-core host, a second 1-vCPU one does not. No warm pool: its members
	// would take part of that room (how they give it up is the pool's own
	// test).
	s := testenv.StartServer(t, "--overcommit", "0.5", "--pool", "none")
	status, body := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":512}`))
	if status != 201 {
		t.Fatalf("first create: %d %s", status, body)
	}
	var first api.Sandbox
	json.Unmarshal(body, &first)
	t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+first.ID, nil) })
	status, body = call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":512}`))
	if status != 503 || errorCode(body) != "capacity_exhausted" {
		t.Fatalf("second create: got %d %s, want 503 capacity_exhausted", status, body)
	}
	// Stopping the first makes room again.
	call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+first.ID, nil)
	status, body = call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":512}`))
	if status != 201 {
		t.Fatalf("create after stop: got %d %s", status, body)
	}
	var third api.Sandbox
	json.Unmarshal(body, &third)
	call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+third.ID, nil)
}

func TestAdminKey(t *testing.T) {
	s := testenv.StartServer(t)
	st, err := os.Stat(filepath.Join(s.DataDir, "admin.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin.key: got %v, %v; want mode 0600", st.Mode(), err)
	}
	if !strings.Contains(s.Log.String(), "admin.key") {
		t.Fatalf("first start did not say where the admin key is:\n%s", s.Log)
	}
	first := s.Key
	s.Stop(false)
	s.Start()
	if s.Key != first {
		t.Fatalf("the admin key changed across a restart")
	}
	if strings.Contains(s.Log.String(), "created the admin API key") {
		t.Fatalf("the second start announced a new key:\n%s", s.Log)
	}
	if status, _ := call(t, s, s.Key, "GET", "/v1/sandboxes", nil); status != 200 {
		t.Fatalf("the key does not work after a restart: %d", status)
	}
}
