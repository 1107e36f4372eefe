package cli

// Tests of the habits docker and kubectl users bring: ls lists the live
// sandboxes, exec -d with ps, logs and kill, and flags refused in the
// flags' terms.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

var procStart = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

// startProcess answers a background exec as the server would: only
// sbx_a has processes, with output, still running.
func (f *fakeServer) startProcess(w http.ResponseWriter, r *http.Request, req api.ExecRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.PathValue("id") != "sbx_a" {
		writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no sandbox " + r.PathValue("id")}})
		return
	}
	p := api.Process{Pid: 40 + len(f.procs), Cmd: req.Cmd, Cwd: "/workspace", User: "user", Running: true, StartedAt: procStart}
	p.SetOutput("out of "+strconv.Itoa(p.Pid)+"\n", "err of "+strconv.Itoa(p.Pid)+"\n")
	f.procs = append(f.procs, p)
	writeJSON(w, 201, p)
}

// processRoutes serves the background processes of sbx_a and extend.
func (f *fakeServer) processRoutes(mux *http.ServeMux) {
	find := func(w http.ResponseWriter, r *http.Request) int {
		if r.PathValue("id") != "sbx_a" {
			writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no sandbox " + r.PathValue("id")}})
			return -1
		}
		for i, p := range f.procs {
			if strconv.Itoa(p.Pid) == r.PathValue("pid") {
				return i
			}
		}
		writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no process " + r.PathValue("pid")}})
		return -1
	}
	mux.HandleFunc("GET /v1/sandboxes/{id}/processes", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.queries = append(f.queries, r.URL.Path+"?"+r.URL.RawQuery)
		if r.PathValue("id") != "sbx_a" {
			writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no sandbox " + r.PathValue("id")}})
			return
		}
		l := api.ProcessList{Processes: []api.Process{}}
		for _, p := range f.procs {
			if r.URL.Query().Get("running") == "true" && !p.Running {
				continue
			}
			if r.URL.Query().Get("output") == "false" {
				p.SetOutput("", "")
			}
			l.Processes = append(l.Processes, p)
		}
		writeJSON(w, 200, l)
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/processes/{pid}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if i := find(w, r); i >= 0 {
			writeJSON(w, 200, f.procs[i])
		}
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/processes/{pid}/stream", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		i := find(w, r)
		var p api.Process
		if i >= 0 {
			p = f.procs[i]
		}
		f.mu.Unlock()
		if i < 0 {
			return
		}
		// The output kept, then more as it comes, then the end.
		streamEvents(w, api.ExecEvent{Type: "start", Pid: p.Pid},
			api.ExecEvent{Type: "stdout", Data: p.Stdout}, api.ExecEvent{Type: "stderr", Data: p.Stderr},
			api.ExecEvent{Type: "stdout", Data: "later\n"}, api.ExecEvent{Type: "exit", ExitCode: intp(3)})
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/processes/{pid}/kill", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if i := find(w, r); i >= 0 {
			f.procs[i].Running, f.procs[i].ExitCode = false, intp(137)
			writeJSON(w, 200, f.procs[i])
		}
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/extend", func(w http.ResponseWriter, r *http.Request) {
		var req api.ExtendRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.TimeoutSeconds > 86400 {
			writeJSON(w, 400, api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_request",
				Message: fmt.Sprintf("timeout_seconds must be between 1 and 86400, got %d", req.TimeoutSeconds)}})
			return
		}
		f.withSandbox(func(s *api.Sandbox) {})(w, r)
	})
}

// lastQuery is the last "PATH?QUERY" the fake server saw.
func (f *fakeServer) lastQuery() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queries) == 0 {
		return ""
	}
	return f.queries[len(f.queries)-1]
}

// ids are the first fields of the lines of a table after its header.
func ids(table string) []string {
	out := []string{}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	for _, l := range lines[1:] {
		out = append(out, strings.Fields(l)[0])
	}
	return out
}

func TestListShowsLiveSandboxesByDefault(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	tests := []struct {
		args      []string
		wantIDs   []string
		wantQuery string
	}{
		{[]string{"sandbox", "ls"}, []string{"sbx_a"}, "/v1/sandboxes?state=starting%2Crunning%2Cpaused"},
		{[]string{"sandbox", "ls", "-a"}, []string{"sbx_a", "sbx_b"}, "/v1/sandboxes?"},
		{[]string{"sandbox", "ls", "--all"}, []string{"sbx_a", "sbx_b"}, "/v1/sandboxes?"},
		{[]string{"sandbox", "ls", "--state", "ended"}, []string{"sbx_b"}, "/v1/sandboxes?state=ended"},
		{[]string{"sandbox", "ls", "-a", "--state", "running"}, []string{"sbx_a"}, "/v1/sandboxes?state=running"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, nil, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := ids(stdout); !reflect.DeepEqual(got, tt.wantIDs) {
				t.Errorf("listed %v, want %v:\n%s", got, tt.wantIDs, stdout)
			}
			if got := f.lastQuery(); got != tt.wantQuery {
				t.Errorf("asked %q, want %q", got, tt.wantQuery)
			}
		})
	}
	code, stdout, _ := run(t, nil, "sandbox", "ls", "--json")
	var l api.SandboxList
	if err := json.Unmarshal([]byte(stdout), &l); err != nil || code != 0 || len(l.Sandboxes) != 1 || l.Sandboxes[0].ID != "sbx_a" {
		t.Errorf("ls --json: exit %d, %v, %q; want sbx_a only", code, err, stdout)
	}
}

func TestLeaseTooLongIsRefusedInFlagTerms(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	const want = "error: invalid_request: --timeout must be between 1s and 24h0m0s, not 48h\n"
	tests := []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"sandbox", "create", "--timeout", "48h"}, 1, want},
		{[]string{"sandbox", "run", "--timeout", "48h", "--", "true"}, 125, want},
		{[]string{"sandbox", "extend", "sbx_a", "--timeout", "48h"}, 1, want},
		{[]string{"sandbox", "create", "--timeout", "172800"}, 1, "error: invalid_request: --timeout must be between 1s and 24h0m0s, not 172800\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, nil, tt.args...)
			if code != tt.wantCode || stderr != tt.want || stdout != "" {
				t.Errorf("got exit %d stdout %q stderr %q, want %d and %q", code, stdout, stderr, tt.wantCode, tt.want)
			}
		})
	}
	// A lease the server takes is sent as it was.
	if code, _, stderr := run(t, nil, "sandbox", "extend", "sbx_a", "--timeout", "24h"); code != 0 {
		t.Errorf("extend --timeout 24h: exit %d: %s", code, stderr)
	}
}

func TestBackgroundProcesses(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)

	code, stdout, stderr := run(t, nil, "sandbox", "exec", "-d", "sbx_a", "--", "sh", "-c", "sleep 1000")
	if code != 0 || stdout != "40\n" || stderr != "" {
		t.Fatalf("exec -d: exit %d stdout %q stderr %q, want 0 and the pid", code, stdout, stderr)
	}
	_, execs, _ := f.snapshot()
	if len(execs) != 1 || !execs[0].Background || !reflect.DeepEqual(execs[0].Cmd.Argv, []string{"sh", "-c", "sleep 1000"}) {
		t.Fatalf("exec -d sent %+v, want a background exec", execs)
	}
	code, stdout, _ = run(t, nil, "sandbox", "exec", "--detach", "--json", "sbx_a", "--", "python3", "srv.py")
	var p api.Process
	if err := json.Unmarshal([]byte(stdout), &p); err != nil || code != 0 || p.Pid != 41 || !p.Running {
		t.Fatalf("exec --detach --json: exit %d, %v, %q", code, err, stdout)
	}

	code, stdout, stderr = run(t, nil, "sandbox", "kill", "sbx_a", "41")
	if code != 0 || stdout != "41\n" {
		t.Fatalf("kill: exit %d stdout %q stderr %q", code, stdout, stderr)
	}

	code, stdout, stderr = run(t, nil, "sandbox", "ps", "sbx_a")
	if code != 0 || !reflect.DeepEqual(ids(stdout), []string{"40"}) {
		t.Errorf("ps: exit %d stdout %q stderr %q, want the running 40 only", code, stdout, stderr)
	}
	if q := f.lastQuery(); q != "/v1/sandboxes/sbx_a/processes?output=false&running=true" {
		t.Errorf("ps asked %q", q)
	}
	code, stdout, _ = run(t, nil, "sandbox", "ps", "-a", "sbx_a")
	want := []string{
		"PID STATUS STARTED COMMAND",
		"40 running " + procStart.Local().Format(time.RFC3339) + " sh -c 'sleep 1000'",
		"41 exited 137 " + procStart.Local().Format(time.RFC3339) + " python3 srv.py",
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		got = append(got, strings.Join(strings.Fields(l), " "))
	}
	if code != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("ps -a: exit %d, got\n%s\nwant\n%s", code, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	code, stdout, _ = run(t, nil, "sandbox", "ps", "--all", "--json", "sbx_a")
	var l api.ProcessList
	if err := json.Unmarshal([]byte(stdout), &l); err != nil || code != 0 || len(l.Processes) != 2 || *l.Processes[1].ExitCode != 137 {
		t.Errorf("ps --all --json: exit %d, %v, %q", code, err, stdout)
	}

	code, stdout, stderr = run(t, nil, "sandbox", "logs", "sbx_a", "40")
	if code != 0 || stdout != "out of 40\n" || stderr != "err of 40\n" {
		t.Errorf("logs: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, nil, "sandbox", "logs", "-f", "sbx_a", "40")
	if code != 0 || stdout != "out of 40\nlater\n" || stderr != "err of 40\n" {
		t.Errorf("logs -f: exit %d stdout %q stderr %q, want the output kept and then more, exit 0", code, stdout, stderr)
	}

	failures := []struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"sandbox", "logs", "sbx_a", "99"}, 1, "error: not_found: no process 99\n"},
		{[]string{"sandbox", "kill", "sbx_a", "99", "40"}, 1, "error: not_found: no process 99\n"},
		{[]string{"sandbox", "ps", "sbx_zz"}, 1, "error: not_found: no sandbox sbx_zz\n"},
		{[]string{"sandbox", "logs", "sbx_a"}, 2, "want a sandbox ID and a PID, got 1 arguments"},
		{[]string{"sandbox", "logs", "sbx_a", "x"}, 2, `PID must be a positive integer, not "x"`},
		{[]string{"sandbox", "kill", "sbx_a"}, 2, "want a sandbox ID and at least one PID"},
		{[]string{"sandbox", "ps"}, 2, "want one sandbox ID, got 0 arguments"},
		{[]string{"sandbox", "exec", "-d", "sbx_zz", "--", "true"}, 125, "error: not_found: no sandbox sbx_zz\n"},
	}
	for _, tt := range failures {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := run(t, nil, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("got exit %d stderr %q, want %d and %q", code, stderr, tt.wantCode, tt.wantStderr)
			}
		})
	}
}
