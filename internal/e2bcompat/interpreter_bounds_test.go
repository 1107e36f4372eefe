package e2bcompat

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// bigCellAPI answers every cell of sandbox "run" with n results and n
// stdout chunks of 1 MiB each, then says on written that all of them
// were read (the in-process pipe returns a write once it is read) and
// waits for release before the end event.
func bigCellAPI(n int, written chan<- struct{}, release <-chan struct{}) http.Handler {
	mux := fakeAPI().(*http.ServeMux)
	chunk := strings.Repeat("x", 1<<20)
	mux.HandleFunc("GET /v1/sandboxes/run/contexts", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.CodeContextList{Contexts: []api.CodeContext{{ID: "default"}}})
	})
	mux.HandleFunc("POST /v1/sandboxes/run/code", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		for range n {
			enc.Encode(api.CodeEvent{Type: api.CodeEventResult, Result: &api.CodeResult{Text: chunk}})
			enc.Encode(api.CodeEvent{Type: api.CodeEventStdout, Text: chunk})
		}
		written <- struct{}{}
		<-release
		enc.Encode(api.CodeEvent{Type: api.CodeEventEnd, ExecutionCount: 1})
	})
	return mux
}

// discardWriter is an E2B client that reads and forgets.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) Flush()                      {}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestCellOutputNotKept checks that a cell's output, once passed on, is
// not also kept by the layer: 64 MiB of results and 64 MiB of stdout,
// all read, leave the heap well under that before the cell ends. Helper
// cells keep nothing either.
func TestCellOutputNotKept(t *testing.T) {
	const n = 64
	for _, name := range []string{"execute", "helper"} {
		t.Run(name, func(t *testing.T) {
			written, release := make(chan struct{}), make(chan struct{})
			s, err := New(Config{API: bigCellAPI(n, written, release), Secret: bytes.Repeat([]byte{7}, SecretSize)})
			if err != nil {
				t.Fatal(err)
			}
			before := heapInUse()
			done := make(chan struct{})
			go func() {
				defer close(done)
				if name == "helper" {
					sbx := &Sandbox{ID: "run", C: s.client("wr_good"), User: UserDefault}
					runHelper(t.Context(), sbx, "", "x")
					return
				}
				req := httptest.NewRequest(http.MethodPost, "/execute", strings.NewReader(`{"code":"x"}`))
				req.Header.Set(headerSandboxID, "run")
				req.Header.Set(headerSandboxPort, InterpreterPort)
				req.Header.Set(headerAccessToken, s.sealToken("run", "wr_good"))
				s.ServeHTTP(&discardWriter{h: http.Header{}}, req)
			}()
			<-written
			grew := heapInUse() - before
			close(release)
			<-done
			if grew > 24<<20 {
				t.Errorf("got the heap %d MiB larger with %d MiB read, want under 24 MiB", grew>>20, 2*n)
			}
		})
	}
}
