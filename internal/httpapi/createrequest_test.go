package httpapi

import (
	"reflect"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// TestCreateRequest pins the one conversion of the API's create request:
// every field arrives in the domain's form, and the checks of the
// request's own shape (moved here from the manager's specFor) refuse
// what they did there.
func TestCreateRequest(t *testing.T) {
	gib, cost := 3, int64(7)
	full := api.CreateSandboxRequest{
		Isolation: "gvisor", Image: "default", VCPUs: 4, MemoryMiB: 2048, DiskGiB: &gib,
		TimeoutSeconds: 60, OnLeaseEnd: "pause", Env: map[string]string{"A": "1"},
		Metadata: map[string]string{"k": "v"}, Network: &api.Network{Internet: true, Allow: []string{"a.example"}},
		MaxCostMicros: &cost,
	}
	got, err := createRequest(full)
	if err != nil {
		t.Fatal(err)
	}
	want := service.CreateRequest{
		Isolation: "gvisor", Image: "default", VCPUs: 4, MemoryMiB: 2048, DiskGiB: &gib,
		TimeoutSeconds: 60, OnLeaseEnd: sandbox.OnLeaseEndPause, Env: map[string]string{"A": "1"},
		Metadata: map[string]string{"k": "v"}, Network: sandbox.Network{Internet: true, Allow: []string{"a.example"}},
		MaxCostMicros: &cost,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// Every field of the API's request is converted: one added there and
	// not here fails this count.
	if n, m := reflect.TypeFor[api.CreateSandboxRequest]().NumField(), reflect.TypeFor[service.CreateRequest]().NumField(); n != m {
		t.Fatalf("api.CreateSandboxRequest has %d fields, service.CreateRequest %d", n, m)
	}
	if got, err := createRequest(api.CreateSandboxRequest{}); err != nil || !reflect.DeepEqual(got, service.CreateRequest{}) {
		t.Fatalf("empty request: got %+v, %v", got, err)
	}

	refused := []struct {
		name string
		req  api.CreateSandboxRequest
		msg  string
	}{
		{"env name with =", api.CreateSandboxRequest{Env: map[string]string{"A=B": "x"}}, `bad environment variable "A=B"`},
		{"env name with a comma", api.CreateSandboxRequest{Env: map[string]string{"A,B": "x"}}, `bad environment variable "A,B"`},
		{"env name starting with a digit", api.CreateSandboxRequest{Env: map[string]string{"1A": "x"}}, `bad environment variable "1A"`},
		{"env value with NUL", api.CreateSandboxRequest{Env: map[string]string{"A": "x\x00"}}, `bad environment variable "A"`},
		{"env value too long", api.CreateSandboxRequest{Env: map[string]string{"A": strings.Repeat("x", maxEnvValue+1)}}, `bad environment variable "A"`},
		{"too many env variables", api.CreateSandboxRequest{Env: manyEntries(maxEnv + 1)}, "at most 256 environment variables"},
		{"metadata key too long", api.CreateSandboxRequest{Metadata: map[string]string{strings.Repeat("k", 129): "v"}}, "bad metadata entry"},
		{"empty metadata key", api.CreateSandboxRequest{Metadata: map[string]string{"": "v"}}, `bad metadata entry ""`},
		{"too many metadata entries", api.CreateSandboxRequest{Metadata: manyEntries(maxMetadata + 1)}, "at most 64 metadata entries"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := createRequest(tt.req)
			if sandbox.KindOf(err) != sandbox.KindInvalid || !strings.Contains(sandbox.MessageOf(err), tt.msg) {
				t.Fatalf("got %v, want invalid_request with %q", err, tt.msg)
			}
		})
	}
}

func manyEntries(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m["K"+strings.Repeat("x", i)] = "v"
	}
	return m
}
