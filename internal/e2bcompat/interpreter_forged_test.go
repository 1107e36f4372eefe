package e2bcompat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// forgedCellAPI is the API of sandbox "run" whose cells are answered by
// answer: what root inside the sandbox can make the agent's /code stream
// say once it stands in for python3, the kernel or the agent itself. The
// API's own guard (httpapi's streamGuard: lines of 8 MiB at most, each a
// JSON object, a terminal event added to a broken stream) is not in
// front of it here, so the layer is tried against more than it gets.
// called is closed with the call's context once a cell is asked for.
func forgedCellAPI(answer func(w http.ResponseWriter, r *http.Request), called chan<- context.Context) http.Handler {
	mux := fakeAPI().(*http.ServeMux)
	mux.HandleFunc("GET /v1/sandboxes/run/contexts", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.CodeContextList{Contexts: []api.CodeContext{{ID: "default"}}})
	})
	mux.HandleFunc("POST /v1/sandboxes/run/code", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if called != nil {
			called <- r.Context()
		}
		answer(w, r)
	})
	return mux
}

// ndjsonStart answers 200 as an event stream and flushes it.
func ndjsonStart(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// startExecute posts a cell to an E2B server over loopback HTTP.
func startExecute(t *testing.T, ctx context.Context, s *Server) *http.Response {
	t.Helper()
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/execute", strings.NewReader(`{"code":"x"}`))
	req.Header.Set(headerSandboxID, "run")
	req.Header.Set(headerSandboxPort, InterpreterPort)
	req.Header.Set(headerAccessToken, s.sealToken("run", "wr_good"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestExecuteForgedKernel answers /execute's cell with what a forged
// kernel can send. Each answer must end the E2B stream well formed (an
// error line named SandboxError, then end_of_execution; or a 500 whose
// text says why, when nothing was passed on yet) or be passed on,
// with every line bounded: nothing the kernel sends is held whole past the
// client's line bound (9 MiB), and an invalid UTF-8 line grows at most
// threefold (each bad byte becomes U+FFFD).
func TestExecuteForgedKernel(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter)
		// wantTypes are the stream's line types, keepalives left out.
		wantTypes string
		// wantValue is in the error line's value.
		wantValue string
		// maxLine bounds the longest line of the E2B stream.
		maxLine int
		// status500: the answer failed before any output, within the
		// header grace: the layer answers the error as text, not a stream.
		status500 bool
	}{
		{name: "line over the client's bound", answer: func(w http.ResponseWriter) {
			ndjsonStart(w)
			w.Write([]byte(`{"type":"stdout","text":"` + strings.Repeat("x", 12*mib) + `"}` + "\n"))
		}, wantTypes: "error number_of_executions end_of_execution", wantValue: "event line too long", maxLine: 4 << 10, status500: true},
		{name: "line without an end", answer: func(w http.ResponseWriter) {
			ndjsonStart(w)
			w.Write([]byte(`{"type":"stdout","text":"` + strings.Repeat("x", 12*mib)))
		}, wantTypes: "error number_of_executions end_of_execution", wantValue: "event line too long", maxLine: 4 << 10, status500: true},
		{name: "not JSON", answer: func(w http.ResponseWriter) {
			ndjsonStart(w)
			w.Write([]byte("{\"type\":\"stdout\",\"text\":\"a\"}\n\x00\x01garbage\n"))
		}, wantTypes: "stdout error number_of_executions end_of_execution", wantValue: "malformed event", maxLine: 4 << 10},
		{name: "JSON of the wrong shape", answer: func(w http.ResponseWriter) {
			ndjsonStart(w)
			w.Write([]byte(`{"type":"result","result":{"text":["not","a","string"]}}` + "\n"))
		}, wantTypes: "error number_of_executions end_of_execution", wantValue: "malformed event", maxLine: 4 << 10, status500: true},
		{name: "no end event", answer: func(w http.ResponseWriter) {
			ndjsonStart(w)
			w.Write([]byte(`{"type":"stdout","text":"a"}` + "\n"))
		}, wantTypes: "stdout error number_of_executions end_of_execution", wantValue: "ended", maxLine: 4 << 10},
		{name: "unknown types, then end", answer: func(w http.ResponseWriter) {
			ndjsonStart(w)
			for range 10000 {
				w.Write([]byte(`{"type":"nonsense","text":"` + strings.Repeat("y", 100) + `"}` + "\n"))
			}
			w.Write([]byte(`{"type":"end","execution_count":1}` + "\n"))
		}, wantTypes: "number_of_executions end_of_execution", maxLine: 4 << 10},
		{name: "invalid UTF-8 under the bound", answer: func(w http.ResponseWriter) {
			ndjsonStart(w)
			w.Write([]byte(`{"type":"stdout","text":"` + strings.Repeat("\xff", 8*mib-64) + `"}` + "\n"))
			w.Write([]byte(`{"type":"end","execution_count":1}` + "\n"))
		}, wantTypes: "stdout number_of_executions end_of_execution", maxLine: 3*8*mib + 4<<10},
		{name: "an exception line of 8 MiB", answer: func(w http.ResponseWriter) {
			ndjsonStart(w)
			b, _ := json.Marshal(api.CodeEvent{Type: api.CodeEventException, Exception: &api.CodeException{Name: "E", Value: "v", Traceback: strings.Repeat("t", 8*mib-128)}})
			w.Write(append(b, '\n'))
			w.Write([]byte(`{"type":"end","execution_count":99999999999}` + "\n"))
		}, wantTypes: "error number_of_executions end_of_execution", maxLine: 8*mib + 4<<10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer := func(w http.ResponseWriter, r *http.Request) { tt.answer(w) }
			s, err := New(Config{API: forgedCellAPI(answer, nil), Secret: bytes.Repeat([]byte{7}, SecretSize)})
			if err != nil {
				t.Fatal(err)
			}
			resp := startExecute(t, t.Context(), s)
			if tt.status500 {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), tt.wantValue) || len(b) > tt.maxLine {
					t.Errorf("got %d %.200q (%d bytes), want 500 saying %q in at most %d bytes", resp.StatusCode, b, len(b), tt.wantValue, tt.maxLine)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got status %d, want 200", resp.StatusCode)
			}
			br := bufio.NewReaderSize(resp.Body, 64<<10)
			var types []string
			longest := 0
			for {
				line, err := br.ReadBytes('\n')
				if errors.Is(err, io.EOF) && len(line) == 0 {
					break
				}
				if err != nil {
					t.Fatalf("reading the stream: %v (after %v)", err, types)
				}
				longest = max(longest, len(line))
				var l struct{ Type, Name, Value string }
				if err := json.Unmarshal(line, &l); err != nil {
					t.Fatalf("line of %d bytes is not JSON: %v", len(line), err)
				}
				if l.Type == lineKeepalive {
					continue
				}
				types = append(types, l.Type)
				if l.Type == lineError && tt.wantValue != "" && (l.Name != sandboxErrName || !strings.Contains(l.Value, tt.wantValue)) {
					t.Errorf("got error line %s: %.200s, want %s saying %q", l.Name, l.Value, sandboxErrName, tt.wantValue)
				}
			}
			if got := strings.Join(types, " "); got != tt.wantTypes {
				t.Errorf("got lines %q, want %q", got, tt.wantTypes)
			}
			if longest > tt.maxLine {
				t.Errorf("got a line of %d bytes, want at most %d", longest, tt.maxLine)
			}
		})
	}
}

// TestExecuteForgedKernelHolds answers a cell with a kernel that never
// answers, and with one whose output never ends: the E2B stream sends its
// 200 and keepalives, passes the output on as it is read, and once the
// client leaves the call to the API ends too, however the kernel goes on.
func TestExecuteForgedKernelHolds(t *testing.T) {
	old := codeKeepaliveEvery
	codeKeepaliveEvery = 50 * time.Millisecond
	t.Cleanup(func() { codeKeepaliveEvery = old })
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		want   string // the line type the client waits for before leaving
	}{
		{name: "no answer at all", answer: func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, want: lineKeepalive},
		{name: "a 200 and then nothing", answer: func(w http.ResponseWriter, r *http.Request) {
			ndjsonStart(w)
			<-r.Context().Done()
		}, want: lineKeepalive},
		{name: "endless output", answer: func(w http.ResponseWriter, r *http.Request) {
			ndjsonStart(w)
			line := []byte(`{"type":"stdout","text":"` + strings.Repeat("z", 32<<10) + `"}` + "\n")
			for r.Context().Err() == nil {
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		}, want: lineStdout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := make(chan context.Context, 1)
			s, err := New(Config{API: forgedCellAPI(tt.answer, called), Secret: bytes.Repeat([]byte{7}, SecretSize)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp := startExecute(t, ctx, s)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got status %d, want 200", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			for seen := 0; seen < 3; {
				line, err := br.ReadBytes('\n')
				if err != nil {
					t.Fatalf("reading the stream: %v", err)
				}
				var l struct{ Type string }
				json.Unmarshal(line, &l)
				if l.Type == tt.want {
					seen++
				}
			}
			var apiCtx context.Context
			select {
			case apiCtx = <-called:
			case <-time.After(5 * time.Second):
				t.Fatal("the cell never reached the API")
			}
			cancel()
			select {
			case <-apiCtx.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("got the API's call still running 5 s after the client left, want it ended")
			}
		})
	}
}
