package e2e

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// collector is an OTLP/HTTP trace collector on loopback that keeps what
// it receives.
type collector struct {
	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []map[string]string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	req := &coltrace.ExportTraceServiceRequest{}
	if err == nil {
		err = proto.Unmarshal(data, req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		c.resources = append(c.resources, res)
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// TestTracesExported: a server started with OTEL_EXPORTER_OTLP_ENDPOINT
// sends the spans of a real sandbox's create and stop (the manager's, with
// the backend's calls as their children) to the collector by the time it
// exits, as service withruntime, and no environment value in any of them.
func TestTracesExported(t *testing.T) {
	const secret = "e2e-env-value-never-traced"
	c := &collector{}
	srv := httptest.NewServer(c)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
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

	c.mu.Lock()
	defer c.mu.Unlock()
	byName := map[string][]*tracepb.Span{}
	for _, sp := range c.spans {
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
	for _, res := range c.resources {
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
