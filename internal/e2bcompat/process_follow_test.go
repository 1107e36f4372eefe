package e2bcompat

import (
	"bytes"
	"connectrpc.com/connect"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/withruntime/withruntime/client"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	pb "github.com/withruntime/withruntime/internal/e2bcompat/proto/process"
)

// TestFollowEndIsLast: with keepalives as often as can be, nothing is
// sent after the end event, nor after follow returned.
func TestFollowEndIsLast(t *testing.T) {
	mux := fakeAPI().(*http.ServeMux)
	mux.HandleFunc("GET /v1/sandboxes/run/processes/{pid}/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		enc.Encode(api.ExecEvent{Type: api.EventStart, Pid: 7})
		enc.Encode(api.OutputEvent(api.EventStdout, []byte("x")))
		time.Sleep(time.Millisecond) // keepalives fire meanwhile
		code := 0
		enc.Encode(api.ExecEvent{Type: api.EventExit, ExitCode: &code})
	})
	s, err := New(Config{API: mux, Secret: make([]byte, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	sbx := &Sandbox{ID: "run", C: s.client("wr_good"), User: UserDefault}
	for i := range 200 {
		var mu sync.Mutex
		var kinds []string
		returned := false
		send := func(ev *pb.ProcessEvent) error {
			mu.Lock()
			defer mu.Unlock()
			k := "other"
			switch {
			case ev.GetEnd() != nil:
				k = "end"
			case ev.GetKeepalive() != nil:
				k = "keepalive"
			}
			if returned {
				k = "after return: " + k
			}
			kinds = append(kinds, k)
			return nil
		}
		if err := follow(t.Context(), sbx, 7, false, 20*time.Microsecond, send); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		returned = true
		mu.Unlock()
		time.Sleep(100 * time.Microsecond) // room for a late keepalive
		mu.Lock()
		last := kinds[len(kinds)-1]
		mu.Unlock()
		if last != "end" {
			t.Fatalf("run %d: got %q last, want end", i, last)
		}
	}
}

// TestDeadlineKeepsItsCode: a call that runs out of the time its client
// gave (Connect-Timeout-Ms, what commands.run(timeout=) sends) answers
// deadline_exceeded, not internal; a cancel answers canceled.
func TestDeadlineKeepsItsCode(t *testing.T) {
	big := newBigDirAPI(1)
	big.gate = make(chan struct{})
	defer close(big.gate)
	s, err := New(Config{API: big.handler(), Secret: bytes.Repeat([]byte{7}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	req := bigDirRequest(s, "ListDir", `{"path":"d"}`)
	req.Header.Set("Connect-Timeout-Ms", "200")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	var out map[string]any
	json.Unmarshal(w.Body.Bytes(), &out)
	if out["code"] != "deadline_exceeded" {
		t.Errorf("ListDir past its deadline: got %d %s, want deadline_exceeded", w.Code, w.Body)
	}
	for _, c := range []struct {
		err  error
		want connect.Code
	}{
		{&client.TransportError{Err: context.DeadlineExceeded}, connect.CodeDeadlineExceeded},
		{fmt.Errorf("listing: %w", context.Canceled), connect.CodeCanceled},
		{&Error{Status: http.StatusNotFound, Message: "no"}, connect.CodeNotFound},
	} {
		ce := connectError(c.err)
		if ce.Code() != c.want || !errors.Is(ce, c.err) {
			t.Errorf("%v: got %v (wrapping it: %v), want %v wrapping it", c.err, ce.Code(), errors.Is(ce, c.err), c.want)
		}
	}
}

// TestFollowSandboxGone: a process stream that breaks because its sandbox
// no longer runs ends unavailable, saying the sandbox was killed (E2B's
// clients then ask /health and report the sandbox gone); one that breaks
// while the sandbox runs answers the API's error.
func TestFollowSandboxGone(t *testing.T) {
	mux := fakeAPI().(*http.ServeMux)
	mux.HandleFunc("GET /v1/sandboxes/{id}/processes/{pid}/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		w.Write([]byte(`{"error":{"code":"conflict","message":"sandbox ended under the process (stopped)"}}`))
	})
	// "stopping" reads running twice (its stop is under way) and then ended.
	var asked int
	mux.HandleFunc("GET /v1/sandboxes/stopping", func(w http.ResponseWriter, r *http.Request) {
		asked++
		state := "ended"
		if asked <= 2 {
			state = "running"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"id": "stopping", "state": state})
	})
	s, err := New(Config{API: mux, Secret: make([]byte, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	send := func(*pb.ProcessEvent) error { return nil }
	for _, c := range []struct {
		id   string
		want connect.Code
	}{{"run", connect.CodeFailedPrecondition}, {"zzz", connect.CodeUnavailable}, {"ended", connect.CodeUnavailable}, {"stopping", connect.CodeUnavailable}} {
		err := follow(t.Context(), &Sandbox{ID: c.id, C: s.client("wr_good"), User: UserDefault}, 7, false, time.Hour, send)
		if connect.CodeOf(err) != c.want {
			t.Errorf("%s: got %v (%v), want %v", c.id, connect.CodeOf(err), err, c.want)
		}
		if c.want == connect.CodeUnavailable && !strings.Contains(err.Error(), "killed or reached its end of life") {
			t.Errorf("%s: got %v, want it to say the sandbox was killed", c.id, err)
		}
	}
}
