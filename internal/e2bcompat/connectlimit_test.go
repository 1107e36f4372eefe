package e2bcompat

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	fspb "github.com/withruntime/withruntime/internal/e2bcompat/proto/filesystem"
	"github.com/withruntime/withruntime/internal/e2bcompat/proto/filesystem/filesystemconnect"
	pb "github.com/withruntime/withruntime/internal/e2bcompat/proto/process"
	"github.com/withruntime/withruntime/internal/e2bcompat/proto/process/processconnect"
)

// statusRecorder is a client transport that keeps the HTTP status of the
// last answer, which Connect clients do not show.
type statusRecorder struct {
	mu     sync.Mutex
	status int
	hdr    http.Header
}

func (s *statusRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range s.hdr {
		r.Header[k] = v
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		s.mu.Lock()
		s.status = resp.StatusCode
		s.mu.Unlock()
	}
	return resp, err
}

func (s *statusRecorder) last() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// TestConnectTooLarge sends envd's unary RPCs, over loopback HTTP, a
// request message over the 1 MiB bound and an error the API answers
// payload_too_large: both are 413 in the Connect protocol (not the 429 of
// a rate limit) with the code resource_exhausted, which Connect clients
// read; gRPC-web keeps its 200 and carries the code. A message under the
// bound is served.
func TestConnectTooLarge(t *testing.T) {
	ff := newFakeFiles()
	inner := ff.handler(t)
	// A full disk: mkdir under /full answers what the agent answers for
	// ENOSPC.
	full := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/files/mkdir") && strings.HasPrefix(r.URL.Query().Get("path"), "/full/") {
			apiError(w, http.StatusRequestEntityTooLarge, "payload_too_large", "/full/d: no space left on device")
			return
		}
		inner.ServeHTTP(w, r)
	})
	s, err := New(Config{API: full, Secret: bytes.Repeat([]byte{9}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	hdr := http.Header{}
	hdr.Set(headerSandboxID, "run")
	hdr.Set(headerSandboxPort, EnvdPort)
	hdr.Set(headerAccessToken, s.sealToken("run", "wr_good"))
	rec := &statusRecorder{hdr: hdr}
	hc := &http.Client{Transport: rec}
	big := strings.Repeat("a", maxFSRequest+1)

	tests := []struct {
		name       string
		call       func() error
		wantStatus int
		wantCode   connect.Code
	}{
		{name: "Stat over the bound, Connect JSON", call: func() error {
			_, err := filesystemconnect.NewFilesystemClient(hc, hs.URL, connect.WithProtoJSON()).Stat(t.Context(), connect.NewRequest(&fspb.StatRequest{Path: big}))
			return err
		}, wantStatus: 413, wantCode: connect.CodeResourceExhausted},
		{name: "Stat over the bound, Connect proto", call: func() error {
			_, err := filesystemconnect.NewFilesystemClient(hc, hs.URL).Stat(t.Context(), connect.NewRequest(&fspb.StatRequest{Path: big}))
			return err
		}, wantStatus: 413, wantCode: connect.CodeResourceExhausted},
		{name: "Stat over the bound, gRPC-web", call: func() error {
			_, err := filesystemconnect.NewFilesystemClient(hc, hs.URL, connect.WithGRPCWeb()).Stat(t.Context(), connect.NewRequest(&fspb.StatRequest{Path: big}))
			return err
		}, wantStatus: 200, wantCode: connect.CodeResourceExhausted},
		{name: "SendInput over the bound, Connect JSON", call: func() error {
			c := processconnect.NewProcessClient(hc, hs.URL, connect.WithProtoJSON())
			_, err := c.SendInput(t.Context(), connect.NewRequest(&pb.SendInputRequest{
				Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: 7}},
				Input:   &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte(big)}},
			}))
			return err
		}, wantStatus: 413, wantCode: connect.CodeResourceExhausted},
		{name: "MakeDir on a full disk", call: func() error {
			_, err := filesystemconnect.NewFilesystemClient(hc, hs.URL, connect.WithProtoJSON()).MakeDir(t.Context(), connect.NewRequest(&fspb.MakeDirRequest{Path: "/full/d"}))
			return err
		}, wantStatus: 413, wantCode: connect.CodeResourceExhausted},
		{name: "Stat under the bound", call: func() error {
			_, err := filesystemconnect.NewFilesystemClient(hc, hs.URL, connect.WithProtoJSON()).Stat(t.Context(), connect.NewRequest(&fspb.StatRequest{Path: big[:maxFSRequest-64]}))
			return err
		}, wantStatus: 404, wantCode: connect.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if got := connect.CodeOf(err); got != tt.wantCode {
				t.Errorf("got code %v (%v), want %v", got, err, tt.wantCode)
			}
			if got := rec.last(); got != tt.wantStatus {
				t.Errorf("got status %d, want %d", got, tt.wantStatus)
			}
			var ce *connect.Error
			if tt.wantStatus == 413 && (!errors.As(err, &ce) || !strings.Contains(ce.Message(), "payload_too_large") && !strings.Contains(ce.Message(), "no space left")) {
				t.Errorf("got message %v, want it to say payload_too_large", err)
			}
			if errors.As(err, &ce) && ce.Meta().Get(tooLargeHeader) != "" {
				t.Errorf("got the internal header %s in the answer", tooLargeHeader)
			}
		})
	}
}

// TestConnectTooLargeRaw is the same bound as a client without a Connect
// library sees it, with and without a Content-Length: 413, Connect's
// error body, and a body that is not read to its end.
func TestConnectTooLargeRaw(t *testing.T) {
	s, _, mk := newFilesServer(t)
	hs := httptest.NewServer(s)
	defer hs.Close()
	msg, _ := json.Marshal(map[string]string{"path": strings.Repeat("a", maxFSRequest)})
	for _, chunked := range []bool{false, true} {
		var body io.Reader = bytes.NewReader(msg)
		if chunked {
			body = io.MultiReader(body) // no length: sent chunked
		}
		req, _ := http.NewRequestWithContext(t.Context(), "POST", hs.URL+"/filesystem.Filesystem/Stat", body)
		for k, v := range mk("GET", "/", nil).Header {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb struct{ Code, Message string }
		json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != 413 || eb.Code != "resource_exhausted" || !strings.Contains(eb.Message, "(payload_too_large)") {
			t.Errorf("chunked %v: got %d %+v, want 413 resource_exhausted saying payload_too_large", chunked, resp.StatusCode, eb)
		}
	}
}
