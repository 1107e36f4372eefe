package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestIsolationChoice: on a real server with the default --isolation auto,
// a create without an isolation gets this host's default (gvisor here:
// this host's KVM boots no guest), and every answer says so; unknown
// values are invalid_request, and microvm on a server that does not run
// it is not_supported.
func TestIsolationChoice(t *testing.T) {
	s := testenv.StartServer(t)
	c := newClient(t, s, s.Key)
	sb := mustCreate(t, c, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512})
	if sb.Isolation != "gvisor" {
		t.Errorf("create answer: isolation got %q, want gvisor", sb.Isolation)
	}
	got, err := c.GetSandbox(t.Context(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Isolation != "gvisor" {
		t.Errorf("GET: isolation got %q, want gvisor", got.Isolation)
	}
	list, err := c.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Isolation != "gvisor" {
		t.Errorf("list: got %+v, want the one gvisor sandbox", list)
	}
	post := func(iso string) (int, string) {
		body, _ := json.Marshal(api.CreateSandboxRequest{Isolation: iso, VCPUs: 1, MemoryMiB: 512})
		status, out := call(t, s, s.Key, http.MethodPost, "/v1/sandboxes", bytes.NewReader(body))
		if status/100 == 2 {
			var made api.Sandbox
			json.Unmarshal(out, &made)
			c.StopSandbox(t.Context(), made.ID)
		}
		return status, errorCode(out)
	}
	if status, code := post("firecracker"); status != 400 || code != "invalid_request" {
		t.Errorf("isolation firecracker: got %d %s, want 400 invalid_request", status, code)
	}
	if status, code := post("gvisor"); status != 201 {
		t.Errorf("isolation gvisor: got %d %s, want 201", status, code)
	}
	if !strings.Contains(s.Log.String(), "offered=1") {
		t.Logf("this server runs microvm too: its creates are the conformance suite's")
		return
	}
	if status, code := post("microvm"); status != 422 || code != "not_supported" {
		t.Errorf("isolation microvm on a gvisor-only server: got %d %s, want 422 not_supported", status, code)
	}
}
