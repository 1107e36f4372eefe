package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

func TestNetworkRoutes(t *testing.T) {
	e := newEnv(t, nil)
	full, ro := e.keys[store.KeyFull], e.keys[store.KeyReadOnly]

	getNetwork := func() api.Network {
		t.Helper()
		resp := e.do("GET", "/v1/sandboxes/sbx-1/network", ro, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET network: got %d, want 200", resp.StatusCode)
		}
		var n api.Network
		dec := json.NewDecoder(resp.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := getNetwork(); !reflect.DeepEqual(got, api.Network{}) {
		t.Errorf("GET network at first: got %+v, want off", got)
	}

	before := len(e.fake.callLog())
	resp := e.doJSON("PUT", "/v1/sandboxes/sbx-1/network", full, `{"internet":true,"allow":["api.example.org","*.example.net"]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT network: got %d, want 200", resp.StatusCode)
	}
	var sb api.Sandbox
	if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil {
		t.Fatal(err)
	}
	want := api.Network{Internet: true, Allow: []string{"api.example.org", "*.example.net"}}
	if !reflect.DeepEqual(sb.Network, want) {
		t.Errorf("PUT network answer: got %+v, want %+v", sb.Network, want)
	}
	if calls := e.fake.callLog()[before:]; !slices.Equal(calls, []string{"SetNetwork acct1 sbx-1"}) {
		t.Errorf("calls: got %v", calls)
	}
	if got := getNetwork(); !reflect.DeepEqual(got, want) {
		t.Errorf("GET network after PUT: got %+v, want %+v", got, want)
	}
	resp = e.do("GET", "/v1/sandboxes/sbx-1", ro, nil)
	if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil || !reflect.DeepEqual(sb.Network, want) {
		t.Errorf("GET sandbox shows network %+v (%v), want %+v", sb.Network, err, want)
	}

	tests := []struct {
		name, key, path, body string
		wantStatus            int
	}{
		{"read-only key", ro, "/v1/sandboxes/sbx-1/network", `{"internet":false}`, 403},
		{"manager refuses", full, "/v1/sandboxes/sbx-1/network", `{"internet":false,"allow":["a.example"]}`, 400},
		{"unknown field", full, "/v1/sandboxes/sbx-1/network", `{"internet":true,"deny":["a.example"]}`, 400},
		{"no body", full, "/v1/sandboxes/sbx-1/network", ``, 400},
		{"another account's sandbox", full, "/v1/sandboxes/sbx-admin/network", `{"internet":false}`, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.doJSON("PUT", tt.path, tt.key, tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status: got %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			errorOf(t, resp)
		})
	}
	if got := getNetwork(); !reflect.DeepEqual(got, want) {
		t.Errorf("refused changes changed the policy: %+v", got)
	}
}

func TestEgressLog(t *testing.T) {
	e := newEnv(t, nil)
	ro := e.keys[store.KeyReadOnly]

	resp := e.do("GET", "/v1/sandboxes/sbx-1/egress", ro, nil)
	var log api.EgressLog
	if err := json.NewDecoder(resp.Body).Decode(&log); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET egress: %d, %v", resp.StatusCode, err)
	}
	if log.Events == nil || len(log.Events) != 0 {
		t.Errorf("empty log: got %#v, want an empty array", log.Events)
	}

	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	events := []api.EgressEvent{
		{Time: at, Kind: "dns", Name: "api.example.org", Verdict: "allowed"},
		{Time: at.Add(time.Second), Kind: "tls", Name: "evil.example", Address: "198.18.0.9", Port: 443, Verdict: "refused", Reason: "not in the allow list"},
	}
	e.fake.mu.Lock()
	for _, ev := range events {
		e.fake.egress["sbx-1"] = append(e.fake.egress["sbx-1"], egress.Event(ev))
	}
	e.fake.mu.Unlock()
	resp = e.do("GET", "/v1/sandboxes/sbx-1/egress", ro, nil)
	log = api.EgressLog{}
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&log); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(log.Events, events) {
		t.Errorf("got %+v, want %+v", log.Events, events)
	}

	resp = e.do("GET", "/v1/sandboxes/sbx-admin/egress", ro, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("another account's sandbox: got %d, want 404", resp.StatusCode)
	}
}

func TestNetworkView(t *testing.T) {
	tests := []struct {
		name string
		in   sandbox.Network
		want api.Network
	}{
		{"off", sandbox.Network{}, api.Network{}},
		{"internet", sandbox.Network{Internet: true}, api.Network{Internet: true}},
		{"empty allow", sandbox.Network{Internet: true, Allow: []string{}}, api.Network{Internet: true}},
		{"allow", sandbox.Network{Internet: true, Allow: []string{"a.example"}}, api.Network{Internet: true, Allow: []string{"a.example"}}},
	}
	for _, tt := range tests {
		if got := NetworkView(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
