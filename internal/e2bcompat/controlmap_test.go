package e2bcompat

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

func TestNetworkOf(t *testing.T) {
	no, yes := false, true
	for _, c := range []struct {
		name    string
		allow   *bool
		body    string // the network object
		want    api.Network
		wantErr string // in the 400's message
	}{
		{"nothing: E2B's default is Internet", nil, ``, api.Network{Internet: true}, ""},
		{"allow_internet_access true", &yes, ``, api.Network{Internet: true}, ""},
		{"allow_internet_access false", &no, ``, api.Network{}, ""},
		{"deny all", nil, `{"denyOut":["0.0.0.0/0"]}`, api.Network{}, ""},
		{"allow list", nil, `{"allowOut":["example.org","*.example.com"],"denyOut":["0.0.0.0/0"]}`, api.Network{Internet: true, Allow: []string{"example.org", "*.example.com"}}, ""},
		{"allow list under allow_internet_access false", &no, `{"allowOut":["example.org"]}`, api.Network{Internet: true, Allow: []string{"example.org"}}, ""},
		{"allowOut alone restricts nothing", nil, `{"allowOut":["example.org"]}`, api.Network{Internet: true}, ""},
		{"empty rules and lists", nil, `{"rules":{},"dnsServers":[],"httpsPorts":[]}`, api.Network{Internet: true}, ""},
		{"partial deny", nil, `{"denyOut":["10.0.0.0/8"]}`, api.Network{}, "denyOut 10.0.0.0/8"},
		{"allow an address", nil, `{"allowOut":["1.2.3.4"],"denyOut":["0.0.0.0/0"]}`, api.Network{Internet: true, Allow: []string{"1.2.3.4"}}, ""},
		{"allow CIDRs and names, IPv6 deny all", nil, `{"allowOut":["10.0.0.0/8","example.org"],"denyOut":["::/0","0.0.0.0/0"]}`, api.Network{Internet: true, Allow: []string{"10.0.0.0/8", "example.org"}}, ""},
		{"partial deny beside deny all", nil, `{"denyOut":["0.0.0.0/0","8.8.8.8"]}`, api.Network{}, "denyOut 8.8.8.8"},
		{"rules", nil, `{"rules":{"api.example.org":[{"transform":{"headers":{"a":"b"}}}]}}`, api.Network{}, "network.rules"},
		{"egress proxy", nil, `{"egressProxy":{"address":"p:1"}}`, api.Network{}, "network.egressProxy"},
		{"dns servers", nil, `{"dnsServers":["1.1.1.1"]}`, api.Network{}, "network.dnsServers"},
	} {
		var n *e2bNetwork
		if c.body != "" {
			n = &e2bNetwork{}
			if err := json.Unmarshal([]byte(c.body), n); err != nil {
				t.Fatal(err)
			}
		}
		got, err := networkOf(c.allow, n, false)
		if c.wantErr != "" {
			if httpStatus(err) != http.StatusBadRequest || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: got %v, want a 400 naming %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, %v, want %+v", c.name, got, err, c.want)
		}
	}
	// Under serve --e2b-internet=false, saying nothing denies the
	// internet; asking for it still gets it.
	for _, c := range []struct {
		name  string
		allow *bool
		n     *e2bNetwork
		want  api.Network
	}{
		{"nothing", nil, nil, api.Network{}},
		{"allow_internet_access true", &yes, nil, api.Network{Internet: true}},
		{"allowOut alone", nil, &e2bNetwork{AllowOut: []string{"example.org"}}, api.Network{Internet: true, Allow: []string{"example.org"}}},
	} {
		if got, err := networkOf(c.allow, c.n, true); err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("no internet by default, %s: got %+v, %v, want %+v", c.name, got, err, c.want)
		}
	}
}

func TestCreateRequest(t *testing.T) {
	for _, c := range []struct {
		name       string
		body       string
		wantStatus int    // of the error; 0: none
		wantErr    string // in its message
		check      func(api.CreateSandboxRequest) bool
	}{
		{"defaults", `{"templateID":"base"}`, 0, "", func(r api.CreateSandboxRequest) bool {
			return r.TimeoutSeconds == 300 && r.Image == "" && r.OnLeaseEnd == "" && r.Network.Internet
		}},
		{"code interpreter", `{"templateID":"code-interpreter-v1","timeout":42}`, 0, "", func(r api.CreateSandboxRequest) bool { return r.TimeoutSeconds == 42 }},
		{"metadata and envs", `{"templateID":"base","metadata":{"a":"1"},"envVars":{"X":"y"}}`, 0, "", func(r api.CreateSandboxRequest) bool {
			return r.Metadata["a"] == "1" && r.Env["X"] == "y"
		}},
		{"autoPause", `{"templateID":"base","autoPause":true}`, 0, "", func(r api.CreateSandboxRequest) bool { return r.OnLeaseEnd == "pause" }},
		{"autoResume off", `{"templateID":"base","autoResume":{"enabled":false}}`, 0, "", func(r api.CreateSandboxRequest) bool { return !r.AutoResume }},
		{"no volumes", `{"templateID":"base","volumeMounts":[]}`, 0, "", func(r api.CreateSandboxRequest) bool { return len(r.Volumes) == 0 }},
		{"a template of the account", `{"templateID":"acme/python:3"}`, 0, "", func(r api.CreateSandboxRequest) bool { return r.Template == "acme/python:3" }},
		{"the default image", `{"templateID":"base"}`, 0, "", func(r api.CreateSandboxRequest) bool { return r.Template == "" }},
		{"mcp", `{"templateID":"mcp-gateway","mcp":{"x":{}}}`, 400, "mcp", nil},
		{"iam", `{"templateID":"base","iam":{"tokens":{}}}`, 400, "iam", nil},
		{"volumes", `{"templateID":"base","volumeMounts":[{"name":"v","path":"/v"},{"name":"w","path":"/mnt/w"}]}`, 0, "", func(r api.CreateSandboxRequest) bool {
			return len(r.Volumes) == 2 && r.Volumes[0] == api.VolumeMount{Name: "v", Path: "/v"} && r.Volumes[1] == api.VolumeMount{Name: "w", Path: "/mnt/w"}
		}},
		{"autoResume", `{"templateID":"base","autoPause":true,"autoResume":{"enabled":true}}`, 0, "", func(r api.CreateSandboxRequest) bool { return r.AutoResume && r.OnLeaseEnd == "pause" }},
		{"filesystem pause", `{"templateID":"base","autoPause":true,"autoPauseMemory":false}`, 400, "autoPauseMemory", nil},
	} {
		var n newSandbox
		if err := json.Unmarshal([]byte(c.body), &n); err != nil {
			t.Fatal(err)
		}
		req, err := n.createRequest(false)
		switch {
		case c.wantStatus != 0:
			if httpStatus(err) != c.wantStatus || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: got %v, want %d naming %q", c.name, err, c.wantStatus, c.wantErr)
			}
		case err != nil:
			t.Errorf("%s: got %v, want no error", c.name, err)
		case c.check != nil && !c.check(req):
			t.Errorf("%s: got %+v", c.name, req)
		}
	}
}

// E2B's metadata filter is a query string inside the parameter, its keys
// and values percent-encoded once more.
func TestMetadataQuery(t *testing.T) {
	// What the Python client puts in the parameter for
	// {"a b": "c&d", "k": "v=w"} (quote, then urlencode).
	got, err := metadataQuery([]string{"a%2520b=c%2526d&k=v%253Dw"})
	want := map[string]string{"a b": "c&d", "k": "v=w"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v, want %v", got, err, want)
	}
}

func TestErrorMapping(t *testing.T) {
	for _, c := range []struct {
		code   string
		status int
		rpc    connect.Code
	}{
		{"not_found", 404, connect.CodeNotFound},
		{"lease_ended", 404, connect.CodeUnavailable},
		{"forbidden", 403, connect.CodePermissionDenied},
		{"unauthorized", 401, connect.CodeUnauthenticated},
		{"invalid_request", 400, connect.CodeInvalidArgument},
		{"not_supported", 400, connect.CodeUnimplemented},
		{"conflict", 409, connect.CodeFailedPrecondition},
		{"payload_too_large", 413, connect.CodeResourceExhausted},
		{"concurrency_limit_reached", 429, connect.CodeResourceExhausted},
		{"capacity_exhausted", 503, connect.CodeUnavailable},
		{"internal", 500, connect.CodeInternal},
	} {
		err := fmt.Errorf("wrapped: %w", &client.APIError{Code: c.code, Message: "m"})
		if got := httpStatus(err); got != c.status {
			t.Errorf("%s: got status %d, want %d", c.code, got, c.status)
		}
		if got := connectError(err).Code(); got != c.rpc {
			t.Errorf("%s: got Connect code %v, want %v", c.code, got, c.rpc)
		}
	}
	if got := connectError(errNotFound("x")).Code(); got != connect.CodeUnavailable {
		t.Errorf("a sandbox not found: got Connect code %v, want unavailable", got)
	}
}
