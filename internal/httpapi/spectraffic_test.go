package httpapi

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Every answer the test server gives (newEnv) is checked against
// api/openapi.yaml: its status must be one the operation documents (or
// its default), and a JSON body must fit the documented schema. So the
// traffic of every test of this package, refusals included, holds the
// document to what the server really sends, as firecracker's tests do.

var spec struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// specRouter is the router over api/openapi.yaml, loaded once.
func specRouter(t *testing.T) routers.Router {
	spec.once.Do(func() {
		loader := openapi3.NewLoader()
		if spec.doc, spec.err = loader.LoadFromFile(openapiPath); spec.err != nil {
			return
		}
		spec.router, spec.err = legacy.NewRouter(spec.doc)
	})
	if spec.err != nil {
		t.Fatalf("loading %s: %v", openapiPath, spec.err)
	}
	return spec.router
}

// sandboxesPrefix starts the paths of sandbox routes.
const sandboxesPrefix = "/v1/sandboxes"

// maxCheckedBody bounds the answer body kept for the check: a larger one
// is checked for its status only.
const maxCheckedBody = 1 << 20

// checkedBySpec is h, every answer of which is checked against the
// document; what does not fit fails t.
func checkedBySpec(t *testing.T, h http.Handler) http.Handler {
	router := specRouter(t)
	base, _ := url.Parse(spec.doc.Servers[0].URL)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		// The document's router matches on its server's address.
		lookup := r.Clone(context.WithoutCancel(r.Context()))
		lookup.URL.Scheme, lookup.URL.Host, lookup.Host = base.Scheme, base.Host, base.Host
		route, params, err := router.FindRoute(lookup)
		if err != nil {
			return // no documented route: the server's 404 or 405
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		if status < 400 && strings.HasPrefix(route.Path, sandboxesPrefix) {
			// What a sandbox route answers comes from the tests' fakes
			// (the manager's records, the agent's answers), which fill in
			// only what a test reads; the real ones are checked end to end.
			return
		}
		mt, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type"))
		body := rec.body.Bytes()
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: lookup, PathParams: params, Route: route},
			Status:                 status,
			Header:                 rec.Header(),
			Body:                   io.NopCloser(bytes.NewReader(body)),
			Options: &openapi3filter.Options{
				IncludeResponseStatus: true,
				// Streams and files are checked for their status only.
				ExcludeResponseBody: mt != "application/json" || rec.over,
			},
		}
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			t.Errorf("%s %s answered %d, which api/openapi.yaml does not allow: %v\nbody: %.300s", r.Method, r.URL.Path, status, err, body)
		}
	})
}

// recorder passes an answer on and keeps its status and (up to
// maxCheckedBody) its body.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	over   bool
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.body.Len()+len(b) > maxCheckedBody {
		w.over = true
	} else if !w.over {
		w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *recorder) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
