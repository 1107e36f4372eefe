// Package otlptest is an OTLP/HTTP trace collector on loopback for tests:
// it keeps what an exporter sends to /v1/traces (protobuf, gzip or not), and
// points the standard OTEL_* environment at itself. The server's unit test
// and the end-to-end test of a real sandbox's spans both receive with it.
package otlptest

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one export request's body, compressed or not.
const maxBody = 64 << 20

// Collector keeps the spans and resources it has received.
type Collector struct {
	URL string

	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []map[string]string
}

// Start starts a collector, closed when t ends, and sets the environment
// the OTLP exporter reads so that it sends there (and nothing else of the
// environment changes the resource or turns the export off).
func Start(t testing.TB) *Collector {
	c := &Collector{}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	return c
}

// Spans returns every span received so far.
func (c *Collector) Spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

// Resources returns the string attributes of each resource received so far,
// one map per resource.
func (c *Collector) Resources() []map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]string(nil), c.resources...)
}

func (c *Collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, maxBody)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = io.LimitReader(zr, maxBody)
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
