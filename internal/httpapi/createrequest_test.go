package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// TestCreateRequest pins the one conversion of the API's create request:
// every field arrives in the domain's form, and none is left behind.
func TestCreateRequest(t *testing.T) {
	gib, cost := 3, int64(7)
	full := api.CreateSandboxRequest{
		Isolation: "gvisor", Image: "default", VCPUs: 4, MemoryMiB: 2048, DiskGiB: &gib,
		TimeoutSeconds: 60, OnLeaseEnd: "pause", Env: map[string]string{"A": "1"},
		Metadata: map[string]string{"k": "v"}, Network: &api.Network{Internet: true, Allow: []string{"a.example"}},
		MaxCostMicros: &cost,
	}
	got := must(createRequest(full))
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
	// not here fails this count (template and image are one field).
	if n, m := reflect.TypeFor[api.CreateSandboxRequest]().NumField(), reflect.TypeFor[service.CreateRequest]().NumField(); n != m+1 {
		t.Fatalf("api.CreateSandboxRequest has %d fields, service.CreateRequest %d", n, m)
	}
	if got := must(createRequest(api.CreateSandboxRequest{})); !reflect.DeepEqual(got, service.CreateRequest{}) {
		t.Fatalf("empty request: got %+v", got)
	}
	// Template is image's newer name: either names the template, both
	// must agree.
	for _, req := range []api.CreateSandboxRequest{{Template: "team/app:v1"}, {Image: "team/app:v1"}, {Template: "team/app:v1", Image: "team/app:v1"}} {
		if got := must(createRequest(req)); got.Image != "team/app:v1" {
			t.Errorf("%+v: got image %q", req, got.Image)
		}
	}
	if _, err := createRequest(api.CreateSandboxRequest{Template: "a", Image: "b"}); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("template and image disagreeing: got %v, want invalid_request", err)
	}
	// An absent policy and an empty one are the same policy: none.
	if got := must(createRequest(api.CreateSandboxRequest{Network: &api.Network{}})); !reflect.DeepEqual(got, service.CreateRequest{}) {
		t.Fatalf("network off: got %+v", got)
	}

	// The node RPC carries the converted request under the API's JSON
	// names: the API's JSON reads as the converted request, and back.
	wire, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	var fromWire service.CreateRequest
	if err := json.Unmarshal(wire, &fromWire); err != nil || !reflect.DeepEqual(fromWire, want) {
		t.Fatalf("the API's JSON read as a service.CreateRequest: got %+v, %v", fromWire, err)
	}
	back, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var again api.CreateSandboxRequest
	if err := json.Unmarshal(back, &again); err != nil || !reflect.DeepEqual(again, full) {
		t.Fatalf("a service.CreateRequest read as the API's: got %+v, %v", again, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
