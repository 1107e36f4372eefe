package agent

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

func (a *testAgent) background(req api.ExecRequest) api.Process {
	a.t.Helper()
	req.Background = true
	var p api.Process
	a.doJSON("POST", "/exec", jsonBody(a.t, req), http.StatusCreated, &p)
	return p
}

func (a *testAgent) process(pid int, query string) api.Process {
	a.t.Helper()
	var p api.Process
	a.doJSON("GET", fmt.Sprintf("/processes/%d%s", pid, query), nil, http.StatusOK, &p)
	return p
}

func TestBackgroundOutputAndKill(t *testing.T) {
	a := newTestAgent(t)
	p := a.background(api.ExecRequest{Cmd: sh(`echo out; echo err >&2; echo $$ > main.pid; sleep 30 & sleep 30`)})
	if p.Pid <= 0 || !p.Running || p.ExitCode != nil {
		t.Fatalf("got %+v, want a running process with a pid", p)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Stdout != "out\n" || p.Stderr != "err\n" {
		if time.Now().After(deadline) {
			t.Fatalf("got stdout %q stderr %q, want %q %q", p.Stdout, p.Stderr, "out\n", "err\n")
		}
		time.Sleep(10 * time.Millisecond)
		p = a.process(p.Pid, "")
	}
	if got := readPid(t, filepath.Join(a.cfg.Workspace, "main.pid")); got != p.Pid {
		t.Errorf("got pid %d from the shell, want %d", got, p.Pid)
	}

	var list api.ProcessList
	a.doJSON("GET", "/processes", nil, http.StatusOK, &list)
	if len(list.Processes) != 1 || list.Processes[0].Pid != p.Pid {
		t.Errorf("got list %+v, want just pid %d", list.Processes, p.Pid)
	}

	var killed api.Process
	a.doJSON("POST", fmt.Sprintf("/processes/%d/kill", p.Pid), nil, http.StatusOK, &killed)
	if killed.Running || killed.ExitCode == nil || *killed.ExitCode != 128+9 || killed.EndedAt == nil {
		t.Errorf("got %+v, want ended with exit code 137", killed)
	}
	if killed.Stdout != "out\n" {
		t.Errorf("got stdout %q after kill, want it kept", killed.Stdout)
	}
	waitGone(t, p.Pid, 2*time.Second)
	// Killing again is no error.
	a.doJSON("POST", fmt.Sprintf("/processes/%d/kill", p.Pid), nil, http.StatusOK, nil)
}

func TestBackgroundWait(t *testing.T) {
	a := newTestAgent(t)
	tests := []struct {
		name        string
		req         api.ExecRequest
		query       string
		wantRunning bool
		wantCode    int
		wantTimeout bool
		minWait     time.Duration
	}{
		{name: "until exit", req: api.ExecRequest{Cmd: sh("sleep 0.2; exit 4")}, query: "?wait=true&timeout_ms=5000", wantCode: 4},
		{name: "without timeout", req: api.ExecRequest{Cmd: sh("sleep 0.1; exit 5")}, query: "?wait=true", wantCode: 5},
		{name: "wait timeout", req: api.ExecRequest{Cmd: argv("sleep", "30")}, query: "?wait=true&timeout_ms=100", wantRunning: true, minWait: 100 * time.Millisecond},
		{name: "own timeout", req: api.ExecRequest{Cmd: argv("sleep", "30"), TimeoutMs: 100}, query: "?wait=true&timeout_ms=5000", wantCode: 128 + 9, wantTimeout: true},
		{name: "no wait", req: api.ExecRequest{Cmd: argv("sleep", "30")}, query: "", wantRunning: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := a.background(tt.req)
			begun := time.Now()
			got := a.process(p.Pid, tt.query)
			if took := time.Since(begun); took < tt.minWait {
				t.Errorf("got an answer after %v, want at least %v", took, tt.minWait)
			}
			if got.Running != tt.wantRunning || got.TimedOut != tt.wantTimeout {
				t.Errorf("got running %v timed_out %v, want %v %v", got.Running, got.TimedOut, tt.wantRunning, tt.wantTimeout)
			}
			if !tt.wantRunning && (got.ExitCode == nil || *got.ExitCode != tt.wantCode) {
				t.Errorf("got exit code %v, want %d", got.ExitCode, tt.wantCode)
			}
		})
	}
}

func TestBackgroundNotRunnable(t *testing.T) {
	a := newTestAgent(t)
	p := a.background(api.ExecRequest{Cmd: argv("no-such-command-xyz")})
	if p.Running || p.ExitCode == nil || *p.ExitCode != 127 || !strings.Contains(p.Stderr, "not found") {
		t.Errorf("got %+v, want an ended process with exit code 127", p)
	}
}

func TestProcessErrors(t *testing.T) {
	a := newTestAgent(t)
	p := a.background(api.ExecRequest{Cmd: argv("true")})
	tests := []struct {
		name, method, path string
		status             int
		code               string
	}{
		{name: "unknown pid", method: "GET", path: "/processes/999999999", status: 404, code: "not_found"},
		{name: "kill unknown pid", method: "POST", path: "/processes/999999999/kill", status: 404, code: "not_found"},
		{name: "bad pid", method: "GET", path: "/processes/abc", status: 400, code: "invalid_request"},
		{name: "bad wait", method: "GET", path: fmt.Sprintf("/processes/%d?wait=maybe", p.Pid), status: 400, code: "invalid_request"},
		{name: "bad timeout", method: "GET", path: fmt.Sprintf("/processes/%d?wait=true&timeout_ms=-3", p.Pid), status: 400, code: "invalid_request"},
		{name: "no route", method: "GET", path: "/nope", status: 404, code: "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.wantError(tt.method, tt.path, nil, tt.status, tt.code)
		})
	}
}

func TestProcTableDropsOldestEnded(t *testing.T) {
	ended := func(pid int) *proc {
		p := &proc{pid: pid, done: make(chan struct{})}
		close(p.done)
		return p
	}
	running := &proc{pid: 1, done: make(chan struct{})}
	tab := newProcTable(2)
	tab.add(running)
	tab.add(ended(2))
	tab.add(ended(3))
	tab.add(ended(4))
	var got []int
	for _, p := range tab.list() {
		got = append(got, p.pid)
	}
	if fmt.Sprint(got) != "[1 4]" {
		t.Errorf("got pids %v, want [1 4]", got)
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		name          string
		max           int
		writes        []string
		want          string
		wantTruncated bool
	}{
		{name: "empty", max: 4, want: ""},
		{name: "fits", max: 4, writes: []string{"ab", "cd"}, want: "abcd"},
		{name: "keeps the end", max: 4, writes: []string{"ab", "cd", "ef"}, want: "cdef", wantTruncated: true},
		{name: "one big write", max: 4, writes: []string{"abcdefgh"}, want: "efgh", wantTruncated: true},
		{name: "many small writes", max: 3, writes: strings.Split("abcdefghijklmnop", ""), want: "nop", wantTruncated: true},
		{name: "no broken rune at the start", max: 4, writes: []string{"x\u2603yz"}, want: "yz", wantTruncated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTail(tt.max)
			for _, w := range tt.writes {
				tl.write([]byte(w))
			}
			got, truncated := tl.snapshot()
			if got != tt.want || truncated != tt.wantTruncated {
				t.Errorf("got %q %v, want %q %v", got, truncated, tt.want, tt.wantTruncated)
			}
		})
	}
}
