package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

func TestSecrets(t *testing.T) {
	updated := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	var calls []string
	var got api.SetSecretRequest
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/secrets/{name}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Method+" "+r.URL.EscapedPath()+" "+r.Header.Get("Content-Type"))
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			writeError(w, 400, "invalid_request", "bad body")
			return
		}
		if got.Host == "10.0.0.1" {
			writeError(w, 400, "invalid_request", "host must be a DNS name, not an IP address")
			return
		}
		writeJSON(w, 200, api.SecretInfo{Name: r.PathValue("name"), Host: got.Host, UpdatedAt: updated})
	})
	mux.HandleFunc("GET /v1/secrets", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.SecretList{Secrets: []api.SecretInfo{{Name: "A", Host: "a.example", UpdatedAt: updated}}})
	})
	mux.HandleFunc("DELETE /v1/secrets/{name}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		if r.PathValue("name") != "A" {
			writeError(w, 404, "not_found", "secret "+r.PathValue("name")+" not found")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	c := newTestClient(t, mux)
	ctx := t.Context()

	info, err := c.SetSecret(ctx, "OPENAI_API_KEY", "api.openai.com", "sk-value")
	if err != nil {
		t.Fatal(err)
	}
	if want := (api.SecretInfo{Name: "OPENAI_API_KEY", Host: "api.openai.com", UpdatedAt: updated}); *info != want {
		t.Errorf("SetSecret: got %+v, want %+v", *info, want)
	}
	if got != (api.SetSecretRequest{Value: "sk-value", Host: "api.openai.com"}) {
		t.Errorf("server got %+v", got)
	}
	_, err = c.SetSecret(ctx, "K", "10.0.0.1", "sk-value")
	if !errors.Is(err, ErrInvalidRequest) || strings.Contains(err.Error(), "sk-value") {
		t.Errorf("SetSecret refused: got %v, want invalid_request without the value", err)
	}
	// A name that is no name is escaped, not a path of its own.
	if _, err := c.SetSecret(ctx, "a/b", "h.example", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetSecret(ctx, "", "h.example", "v"); err == nil {
		t.Error("SetSecret with an empty name: got nil error")
	}

	list, err := c.ListSecrets(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "A" {
		t.Errorf("ListSecrets: got %+v, %v", list, err)
	}

	if err := c.DeleteSecret(ctx, "A"); err != nil {
		t.Errorf("DeleteSecret: %v", err)
	}
	if err := c.DeleteSecret(ctx, "B"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteSecret missing: got %v, want not_found", err)
	}
	if err := c.DeleteSecret(ctx, ""); err == nil {
		t.Error("DeleteSecret with an empty name: got nil error")
	}

	want := []string{
		"PUT /v1/secrets/OPENAI_API_KEY application/json",
		"PUT /v1/secrets/K application/json",
		"PUT /v1/secrets/a%2Fb application/json",
		"DELETE /v1/secrets/A",
		"DELETE /v1/secrets/B",
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("calls: got %q, want %q", calls, want)
	}
}

func TestNetworkAndEgress(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	events := []api.EgressEvent{
		{Time: at, Kind: "dns", Name: "a.example", Verdict: "allowed"},
		{Time: at, Kind: "tcp", Address: "198.18.0.1", Port: 22, Verdict: "refused", Reason: "no name"},
	}
	var network api.Network
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}/network", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "sbx_1" {
			writeError(w, 404, "not_found", "no sandbox")
			return
		}
		writeJSON(w, 200, network)
	})
	mux.HandleFunc("PUT /v1/sandboxes/{id}/network", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&network)
		writeJSON(w, 200, api.Sandbox{ID: r.PathValue("id"), State: "running", Network: network})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/egress", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.EgressLog{Events: events})
	})
	c := newTestClient(t, mux)
	ctx := t.Context()

	want := api.Network{Internet: true, Allow: []string{"*.example.org"}}
	sb, err := c.SetNetwork(ctx, "sbx_1", want)
	if err != nil || !reflect.DeepEqual(sb.Network, want) || sb.ID != "sbx_1" {
		t.Fatalf("SetNetwork: got %+v, %v", sb, err)
	}
	n, err := c.GetNetwork(ctx, "sbx_1")
	if err != nil || !reflect.DeepEqual(*n, want) {
		t.Errorf("GetNetwork: got %+v, %v; want %+v", n, err, want)
	}
	if _, err := c.GetNetwork(ctx, "sbx_2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetNetwork missing: got %v, want not_found", err)
	}
	if _, err := c.GetNetwork(ctx, ""); err == nil {
		t.Error("GetNetwork with an empty id: got nil error")
	}
	got, err := c.Egress(ctx, "sbx_1")
	if err != nil || !reflect.DeepEqual(got, events) {
		t.Errorf("Egress: got %+v, %v; want %+v", got, err, events)
	}
}
