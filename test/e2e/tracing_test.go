package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
	"github.com/withruntime/withruntime/internal/testenv/otlptest"
)

// TestTracesExported: a server started with OTEL_EXPORTER_OTLP_ENDPOINT
// sends the spans of a real sandbox's create and stop (the manager's, with
// the backend's calls as their children) to the collector by the time it
// exits, as service withruntime, and no environment value in any of them.
func TestTracesExported(t *testing.T) {
	const secret = "e2e-env-value-never-traced"
	c := otlptest.Start(t)
	s := testenv.StartServer(t)

	status, body := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":512,"env":{"TOKEN":"`+secret+`"}}`))
	var sb api.Sandbox
	if status != http.StatusCreated || json.Unmarshal(body, &sb) != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	if status, body := call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+sb.ID, nil); status != http.StatusOK {
		t.Fatalf("stop: %d %s", status, body)
	}
	s.Stop(false) // a clean exit flushes the spans

	byName := map[string][]*tracepb.Span{}
	for _, sp := range c.Spans() {
		byName[sp.GetName()] = append(byName[sp.GetName()], sp)
		for _, kv := range sp.GetAttributes() {
			if strings.Contains(kv.GetValue().String(), secret) {
				t.Errorf("span %s: attribute %s holds an environment value", sp.GetName(), kv.GetKey())
			}
		}
		if strings.Contains(sp.GetStatus().GetMessage(), secret) {
			t.Errorf("span %s: its status holds an environment value", sp.GetName())
		}
	}
	for _, res := range c.Resources() {
		if res["service.name"] != "withruntime" {
			t.Errorf("service.name: got %q, want withruntime", res["service.name"])
		}
	}
	parentOf := func(child, parent string) {
		t.Helper()
		for _, ch := range byName[child] {
			for _, p := range byName[parent] {
				if string(ch.GetParentSpanId()) == string(p.GetSpanId()) && string(ch.GetTraceId()) == string(p.GetTraceId()) && hasID(p, sb.ID) {
					return
				}
			}
		}
		t.Errorf("no span %s of sandbox %s under a span %s (got %d and %d)", child, sb.ID, parent, len(byName[child]), len(byName[parent]))
	}
	parentOf("backend.start", "sandbox.create")
	parentOf("backend.destroy", "sandbox.stop")
}

// hasID reports whether span is about sandbox id.
func hasID(span *tracepb.Span, id string) bool {
	for _, kv := range span.GetAttributes() {
		if kv.GetKey() == "withruntime.sandbox.id" && kv.GetValue().GetStringValue() == id {
			return true
		}
	}
	return false
}
