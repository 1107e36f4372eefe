package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// follow reads GET /processes/{pid}/stream (with query) until fn returns
// false or the stream ends, and returns the events read.
func (a *testAgent) follow(pid int, query string, fn func(api.ExecEvent) bool) []api.ExecEvent {
	a.t.Helper()
	req, err := http.NewRequestWithContext(a.t.Context(), "GET", fmt.Sprintf("%s/processes/%d/stream%s", a.url, pid, query), nil)
	if err != nil {
		a.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		a.t.Fatalf("got status %d %q, want 200 application/x-ndjson", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var evs []api.ExecEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			a.t.Fatalf("decoding %q: %v", sc.Bytes(), err)
		}
		evs = append(evs, ev)
		if fn != nil && !fn(ev) {
			break
		}
	}
	return evs
}

func summed(evs []api.ExecEvent) (stdout, stderr string, exit *api.ExecEvent) {
	for i, ev := range evs {
		switch ev.Type {
		case api.EventStdout:
			stdout += ev.Data
		case api.EventStderr:
			stderr += ev.Data
		case api.EventExit:
			exit = &evs[i]
		}
	}
	return stdout, stderr, exit
}

func TestProcessStdin(t *testing.T) {
	a := newTestAgent(t)
	p := a.background(api.ExecRequest{Cmd: sh("while read -r l; do echo got:$l; done; echo eof >&2; exit 3"), KeepStdin: true})
	if !p.StdinOpen {
		t.Fatalf("got %+v, want stdin_open", p)
	}
	path := fmt.Sprintf("/processes/%d/stdin", p.Pid)
	a.doJSON("POST", path, strings.NewReader("one\n"), http.StatusNoContent, nil)
	a.doJSON("POST", path+"?close=true", strings.NewReader("two\n"), http.StatusNoContent, nil)
	evs := a.follow(p.Pid, "", nil)
	if evs[0].Type != api.EventStart || evs[0].Pid != p.Pid {
		t.Errorf("got first event %+v, want start with pid %d", evs[0], p.Pid)
	}
	stdout, stderr, exit := summed(evs)
	if stdout != "got:one\ngot:two\n" || stderr != "eof\n" {
		t.Errorf("got stdout %q stderr %q, want both lines then eof", stdout, stderr)
	}
	if exit == nil || exit.ExitCode == nil || *exit.ExitCode != 3 || evs[len(evs)-1].Type != api.EventExit {
		t.Errorf("got events %+v, want exit 3 last", evs)
	}
	if got := a.process(p.Pid, "").StdinOpen; got {
		t.Errorf("got stdin_open after close, want false")
	}
	if msg := a.wantError("POST", path, strings.NewReader("late"), http.StatusConflict, "conflict"); !strings.Contains(msg, "ended") {
		t.Errorf("got %q, want it to say the process ended", msg)
	}

	plain := a.background(api.ExecRequest{Cmd: argv("sleep", "30")})
	a.wantError("POST", fmt.Sprintf("/processes/%d/stdin", plain.Pid), strings.NewReader("x"), http.StatusConflict, "conflict")
	a.wantError("POST", "/processes/999999/stdin", strings.NewReader("x"), http.StatusNotFound, "not_found")
	a.wantError("POST", path, strings.NewReader(strings.Repeat("x", api.MaxStdinBody+1)), http.StatusRequestEntityTooLarge, "payload_too_large")
}

func TestProcessStdinRefused(t *testing.T) {
	a := newTestAgent(t)
	tests := []struct {
		name string
		req  api.ExecRequest
	}{
		{"foreground", api.ExecRequest{Cmd: argv("cat"), KeepStdin: true}},
		{"with stdin", api.ExecRequest{Cmd: argv("cat"), KeepStdin: true, Background: true, Stdin: "x"}},
		{"unknown user", api.ExecRequest{Cmd: argv("true"), User: "nobody"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.wantError("POST", "/exec", jsonBody(t, tt.req), http.StatusBadRequest, "invalid_request")
		})
	}
}

// TestProcessStreamFollow reattaches to a background process: from the
// start, from offsets, after a reader left, and after the end.
func TestProcessStreamFollow(t *testing.T) {
	a := newTestAgent(t)
	p := a.background(api.ExecRequest{Cmd: sh("printf abc; printf xyz >&2; read -r l; echo $l"), KeepStdin: true})

	// A reader that leaves once it saw the output does not end the process.
	a.follow(p.Pid, "", func(ev api.ExecEvent) bool { return ev.Type != api.EventStdout || ev.Data != "abc" })
	if !a.process(p.Pid, "").Running {
		t.Fatalf("got the process ended by a reader leaving, want it running")
	}
	done := make(chan []api.ExecEvent, 1)
	go func() { done <- a.follow(p.Pid, "?stdout_offset=1&stderr_offset=3", nil) }()
	time.Sleep(100 * time.Millisecond) // let it attach; the output below is live or replayed alike
	a.doJSON("POST", fmt.Sprintf("/processes/%d/stdin?close=true", p.Pid), strings.NewReader("live\n"), http.StatusNoContent, nil)
	evs := <-done
	stdout, stderr, exit := summed(evs)
	if stdout != "bclive\n" || stderr != "" {
		t.Errorf("got stdout %q stderr %q from offsets 1 and 3, want %q and nothing", stdout, stderr, "bclive\n")
	}
	if exit == nil || *exit.ExitCode != 0 {
		t.Errorf("got events %+v, want exit 0", evs)
	}
	// An ended process's stream is its kept output and its exit.
	stdout, stderr, exit = summed(a.follow(p.Pid, "", nil))
	if stdout != "abclive\n" || stderr != "xyz" || exit == nil {
		t.Errorf("got %q %q %v after the end, want the whole output and the exit", stdout, stderr, exit)
	}
	a.wantError("GET", fmt.Sprintf("/processes/%d/stream?stdout_offset=-1", p.Pid), nil, http.StatusBadRequest, "invalid_request")
}
