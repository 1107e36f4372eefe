package httpapi

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/store"
)

// TestArchiveRefusalReachesClient checks that the agent's refusal of an
// upload's entry reaches the client with its status and stable code while
// the client is still sending: the agent answers as soon as it meets the
// entry and reads no further, as internal/agent's extractor does (tested
// there against real files), and 64 MiB of the archive are still to come.
func TestArchiveRefusalReachesClient(t *testing.T) {
	tests := []struct {
		name       string
		typ        byte
		wantStatus int
		wantCode   string
	}{
		{name: "FIFO", typ: tar.TypeFifo, wantStatus: 400, wantCode: "invalid_request"},
		{name: "character device", typ: tar.TypeChar, wantStatus: 400, wantCode: "invalid_request"},
		{name: "past the entry bound", typ: tar.TypeReg, wantStatus: 413, wantCode: "payload_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A stand-in for the agent's PUT /archive: it refuses the first
			// entry that is not a file, or the third file, the way the
			// extractor words it.
			agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tr := tar.NewReader(r.Body)
				for n := 1; ; n++ {
					hdr, err := tr.Next()
					if err != nil {
						writeJSON(w, 400, api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_request", Message: err.Error()}})
						return
					}
					if hdr.Typeflag != tar.TypeReg {
						writeJSON(w, 400, api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_request", Message: fmt.Sprintf("archive entry %q is special", hdr.Name)}})
						return
					}
					if n > 2 {
						writeJSON(w, 413, api.ErrorBody{Error: api.ErrorDetail{Code: "payload_too_large", Message: fmt.Sprintf("archive has more than 2 entries (at %q)", hdr.Name)}})
						return
					}
				}
			}))
			defer agent.Close()
			e := newEnv(t, nil)
			e.fake.mu.Lock()
			e.fake.agentAddr = agent.Listener.Addr().String()
			e.fake.mu.Unlock()

			pr, pw := io.Pipe()
			go func() {
				tw := tar.NewWriter(pw)
				tw.WriteHeader(&tar.Header{Name: "a.txt", Typeflag: tar.TypeReg, Mode: 0o644})
				tw.WriteHeader(&tar.Header{Name: "b.txt", Typeflag: tar.TypeReg, Mode: 0o644})
				tw.WriteHeader(&tar.Header{Name: "dir/bad", Typeflag: tt.typ, Mode: 0o644})
				// The rest of a large archive, which nobody reads.
				tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: 64 << 20})
				_, err := io.Copy(tw, io.LimitReader(zeros{}, 64<<20))
				if err == nil {
					err = tw.Close()
				}
				pw.CloseWithError(err)
			}()
			defer pr.Close()
			resp := e.do("PUT", "/v1/sandboxes/sbx-1/archive?path=d", e.keys[store.KeyFull], chunked{pr})
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("got status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			var body api.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if body.Error.Code != tt.wantCode || !strings.Contains(body.Error.Message, `"dir/bad"`) {
				t.Errorf("got %+v, want %s naming \"dir/bad\"", body.Error, tt.wantCode)
			}
		})
	}
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
