package cli

// The HTTP server here is a fake that speaks the wire contract of package
// api, so that the CLI is tested without the real server
// (internal/httpapi); the end-to-end tests (test/e2e) run it against that.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

const testKey = "wr_test_key"

type fakeServer struct {
	*httptest.Server

	mu        sync.Mutex
	created   []api.CreateSandboxRequest
	execs     []api.ExecRequest
	execIDs   []string
	stopped   []string
	authSeen  []string
	events    []api.ExecEvent // what an exec answers
	createErr *api.ErrorDetail
	execErr   *api.ErrorDetail
	onExec    func(w http.ResponseWriter, r *http.Request) // replaces events when set
	sandboxes map[string]api.Sandbox

	accountsCreated []api.CreateAccountRequest
	keysCreated     []api.CreateKeyRequest
	keysDeleted     []string
	queries         []string // "PATH?QUERY" of GET /v1/sandboxes, /v1/keys and /v1/usage
	trials          int      // POST /v1/trial answered with a key
	trialAuth       []string // the Authorization header of each POST /v1/trial
	trialErr        *api.ErrorDetail

	secrets      map[string]api.SecretInfo // by name
	secretValues []string                  // the value of each PUT /v1/secrets/{name}
	secretBodies []string                  // every request body to /v1/secrets
	egress       []api.EgressEvent         // the egress log of sbx_a

	procs []api.Process // the background processes of sbx_a, oldest first

	templates map[string]api.Template // by "name:tag"
	imports   []string                // the body of each template import
}

var lease = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{
		sandboxes: map[string]api.Sandbox{
			"sbx_a": {ID: "sbx_a", State: "running", VCPUs: 2, MemoryMiB: 4096, LeaseEndsAt: lease, Metadata: map[string]string{"k": "v"},
				CostMicros: 1234, Usage: api.SandboxUsage{Seconds: 90, CPUSeconds: 12.5, MemoryGiBSeconds: 360}},
			"sbx_b": {ID: "sbx_b", State: "ended", VCPUs: 1, MemoryMiB: 512, LeaseEndsAt: lease, EndReason: "lease_ended", CostMicros: 31_250_000},
		},
		events: []api.ExecEvent{{Type: "start", Pid: 1}, {Type: "exit", ExitCode: intp(0)}},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateSandboxRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.created = append(f.created, req)
		if req.TimeoutSeconds > 86400 {
			writeJSON(w, 400, api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_request",
				Message: fmt.Sprintf("timeout_seconds must be between 1 and 86400, got %d", req.TimeoutSeconds)}})
			return
		}
		if f.createErr != nil {
			writeJSON(w, statusOf(f.createErr.Code), api.ErrorBody{Error: *f.createErr})
			return
		}
		s := api.Sandbox{ID: "sbx_new", State: "running", VCPUs: req.VCPUs, MemoryMiB: req.MemoryMiB, LeaseEndsAt: lease}
		f.sandboxes[s.ID] = s
		writeJSON(w, 201, s)
	})
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.queries = append(f.queries, r.URL.Path+"?"+r.URL.RawQuery)
		// As the server does: state=S,... keeps those states, and none
		// keeps every one (sbx_b ended within the last 24 hours).
		l := api.SandboxList{Sandboxes: []api.Sandbox{}}
		states := r.URL.Query().Get("state")
		for _, id := range []string{"sbx_a", "sbx_b"} {
			if sb := f.sandboxes[id]; states == "" || slices.Contains(strings.Split(states, ","), sb.State) {
				l.Sandboxes = append(l.Sandboxes, sb)
			}
		}
		writeJSON(w, 200, l)
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}", f.withSandbox(func(s *api.Sandbox) {}))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", f.withSandbox(func(s *api.Sandbox) {
		s.State, s.EndReason = "ended", "stopped"
		f.stopped = append(f.stopped, s.ID)
	}))
	mux.HandleFunc("POST /v1/sandboxes/{id}/pause", f.withSandbox(func(s *api.Sandbox) { s.State = "paused" }))
	mux.HandleFunc("POST /v1/sandboxes/{id}/resume", f.withSandbox(func(s *api.Sandbox) { s.State = "running" }))
	mux.HandleFunc("POST /v1/sandboxes/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		var req api.ExecRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.execs = append(f.execs, req)
		f.execIDs = append(f.execIDs, r.PathValue("id"))
		onExec, events, execErr := f.onExec, f.events, f.execErr
		f.mu.Unlock()
		if execErr != nil {
			writeJSON(w, statusOf(execErr.Code), api.ErrorBody{Error: *execErr})
			return
		}
		if onExec != nil {
			onExec(w, r)
			return
		}
		if req.Background {
			f.startProcess(w, r, req)
			return
		}
		streamEvents(w, events...)
	})
	f.accountRoutes(mux)
	f.secretRoutes(mux)
	f.processRoutes(mux)
	f.templateRoutes(mux)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.authSeen = append(f.authSeen, r.Header.Get("Authorization"))
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

var created = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// accountRoutes serves accounts, keys, usage and trials.
func (f *fakeServer) accountRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/accounts", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateAccountRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.accountsCreated = append(f.accountsCreated, req)
		if req.Name == "taken" {
			writeJSON(w, 409, api.ErrorBody{Error: api.ErrorDetail{Code: "conflict", Message: "account taken exists"}})
			return
		}
		writeJSON(w, 201, api.Account{ID: "acc_new", Name: req.Name, Concurrency: req.Concurrency, TrialHours: req.TrialHours, CreatedAt: created})
	})
	mux.HandleFunc("GET /v1/accounts", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.AccountList{Accounts: []api.Account{
			{ID: "acc_1", Name: "default", Concurrency: 100, CreatedAt: created},
			{ID: "acc_2", Name: "trial-1", Concurrency: 5, TrialHours: 50, TrialUsedHours: 1.234, CreatedAt: created},
		}})
	})
	mux.HandleFunc("POST /v1/keys", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateKeyRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.keysCreated = append(f.keysCreated, req)
		writeJSON(w, 201, api.Key{ID: "key_new", Account: "acc_1", Kind: req.Kind, Name: req.Name,
			DailyLimitMicros: req.DailyLimitMicros, CreatedAt: created, Secret: "wr_secret_new"})
	})
	mux.HandleFunc("GET /v1/keys", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.queries = append(f.queries, r.URL.Path+"?"+r.URL.RawQuery)
		f.mu.Unlock()
		writeJSON(w, 200, api.KeyList{Keys: []api.Key{
			{ID: "key_1", Account: "acc_1", Kind: "admin", CreatedAt: created},
			{ID: "key_2", Account: "acc_1", Kind: "read_only", Name: "ci", DailyLimitMicros: 2_500_000, Parent: "key_1", CreatedAt: created},
		}})
	})
	mux.HandleFunc("DELETE /v1/keys/{kid}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if kid := r.PathValue("kid"); kid != "key_1" && kid != "key_2" {
			writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no key " + kid}})
			return
		}
		f.keysDeleted = append(f.keysDeleted, r.PathValue("kid"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/usage", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.queries = append(f.queries, r.URL.Path+"?"+r.URL.RawQuery)
		f.mu.Unlock()
		writeJSON(w, 200, api.Usage{
			Rows: []api.UsageRow{
				{Day: "2030-01-01", Account: "acc_1", KeyID: "key_1", SandboxHours: 1.5, CPUHours: 0.25, CostMicros: 46_875},
				{Day: "2030-01-02", Account: "acc_1", KeyID: "key_2", SandboxHours: 0.5, CPUHours: 1, CostMicros: 40_000},
			},
			CostMicros: 86_875,
		})
	})
	mux.HandleFunc("POST /v1/trial", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.trialAuth = append(f.trialAuth, r.Header.Get("Authorization"))
		if f.trialErr != nil {
			writeJSON(w, statusOf(f.trialErr.Code), api.ErrorBody{Error: *f.trialErr})
			return
		}
		f.trials++
		writeJSON(w, 201, api.Trial{Account: "acc_trial", Key: fmt.Sprintf("wr_trial_%d", f.trials), TrialHours: 50})
	})
}

func (f *fakeServer) withSandbox(change func(*api.Sandbox)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		s, ok := f.sandboxes[r.PathValue("id")]
		if !ok {
			writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no sandbox " + r.PathValue("id")}})
			return
		}
		change(&s)
		f.sandboxes[s.ID] = s
		writeJSON(w, 200, s)
	}
}

func (f *fakeServer) snapshot() (created []api.CreateSandboxRequest, execs []api.ExecRequest, stopped []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(created, f.created...), append(execs, f.execs...), append(stopped, f.stopped...)
}

func (f *fakeServer) auth() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.authSeen...)
}

func statusOf(code string) int {
	return map[string]int{
		"not_found": 404, "conflict": 409, "lease_ended": 409, "spending_limit_reached": 402,
		"capacity_exhausted": 503, "unauthorized": 401, "forbidden": 403, "rate_limited": 429,
	}[code]
}

func intp(i int) *int { return &i }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func streamEvents(w http.ResponseWriter, events ...api.ExecEvent) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(200)
	enc := json.NewEncoder(w)
	for _, ev := range events {
		enc.Encode(ev)
		w.(http.Flusher).Flush()
	}
}

// closedURL returns the address of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// useServer points the CLI at url through the environment.
func useServer(t *testing.T, url string) {
	t.Setenv(client.EnvBaseURL, url)
	t.Setenv(client.EnvAPIKey, testKey)
}

// run runs the command line and returns its exit code and output.
func run(t *testing.T, app *App, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if app == nil {
		app = &App{}
	}
	var out, errw bytes.Buffer
	code = app.Main(args, strings.NewReader(""), &out, &errw)
	return code, out.String(), errw.String()
}

func TestRunExitsWithCommandCode(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	f.events = []api.ExecEvent{
		{Type: "start", Pid: 1},
		{Type: "stdout", Data: "42\n"},
		{Type: "stderr", Data: "warning\n"},
		{Type: "exit", ExitCode: intp(3)},
	}
	code, stdout, stderr := run(t, nil, "sandbox", "run", "--", "python3", "-c", "print(6 * 7)")
	if code != 3 {
		t.Errorf("exit code: got %d, want 3 (stderr %q)", code, stderr)
	}
	if stdout != "42\n" || stderr != "warning\n" {
		t.Errorf("output: got stdout %q stderr %q", stdout, stderr)
	}
	created, execs, stopped := f.snapshot()
	if len(created) != 1 || !reflect.DeepEqual(created[0], api.CreateSandboxRequest{}) {
		t.Errorf("create requests: got %+v, want one with defaults", created)
	}
	if len(execs) != 1 || !reflect.DeepEqual(execs[0].Cmd.Argv, []string{"python3", "-c", "print(6 * 7)"}) {
		t.Errorf("exec requests: got %+v", execs)
	}
	if !reflect.DeepEqual(stopped, []string{"sbx_new"}) {
		t.Errorf("stopped: got %v, want [sbx_new]", stopped)
	}
	if got := f.auth()[0]; got != "Bearer "+testKey {
		t.Errorf("authorization: got %q", got)
	}
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name string
		exit api.ExecEvent
		want int
	}{
		{"zero", api.ExecEvent{Type: "exit", ExitCode: intp(0)}, 0},
		{"code", api.ExecEvent{Type: "exit", ExitCode: intp(42)}, 42},
		{"timed out without code", api.ExecEvent{Type: "exit", TimedOut: true}, 124},
		{"timed out with code", api.ExecEvent{Type: "exit", TimedOut: true, ExitCode: intp(137)}, 124},
		{"no code", api.ExecEvent{Type: "exit"}, 1},
		{"out of range", api.ExecEvent{Type: "exit", ExitCode: intp(256)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			useServer(t, f.URL)
			f.events = []api.ExecEvent{{Type: "start", Pid: 1}, tt.exit}
			if code, _, stderr := run(t, nil, "sandbox", "run", "--", "true"); code != tt.want {
				t.Errorf("got %d, want %d (stderr %q)", code, tt.want, stderr)
			}
		})
	}
}

func TestRunPlatformFailures(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(f *fakeServer)
		wantStderr  string // exact, or a prefix when it ends with "..."
		wantStopped bool
	}{
		{"create refused", func(f *fakeServer) {
			f.createErr = &api.ErrorDetail{Code: "spending_limit_reached", Message: "daily spending limit reached"}
		}, "error: spending_limit_reached: daily spending limit reached\n", false},
		{"exec refused", func(f *fakeServer) {
			f.execErr = &api.ErrorDetail{Code: "capacity_exhausted", Message: "host full"}
		}, "error: capacity_exhausted: host full\n", true},
		{"error event", func(f *fakeServer) {
			f.events = []api.ExecEvent{{Type: "start"}, {Type: "stdout", Data: "a"}, {Type: "error", Error: &api.ErrorDetail{Code: "lease_ended", Message: "the lease ended"}}}
		}, "error: lease_ended: the lease ended\n", true},
		{"stream cut before exit", func(f *fakeServer) {
			f.events = []api.ExecEvent{{Type: "start"}, {Type: "stdout", Data: "a"}}
		}, "error: unavailable: POST ...", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			useServer(t, f.URL)
			tt.setup(f)
			code, _, stderr := run(t, nil, "sandbox", "run", "--", "true")
			if code != 125 {
				t.Errorf("exit code: got %d, want 125", code)
			}
			checkStderr(t, stderr, tt.wantStderr)
			if _, _, stopped := f.snapshot(); (len(stopped) == 1) != tt.wantStopped {
				t.Errorf("stopped: got %v, want stopped %v", stopped, tt.wantStopped)
			}
		})
	}
}

func checkStderr(t *testing.T, got, want string) {
	t.Helper()
	if prefix, ok := strings.CutSuffix(want, "..."); ok {
		if !strings.HasPrefix(got, prefix) || strings.Count(got, "\n") != 1 {
			t.Errorf("stderr: got %q, want one line starting %q", got, prefix)
		}
		return
	}
	if got != want {
		t.Errorf("stderr: got %q, want %q", got, want)
	}
}

func TestRunUnreachable(t *testing.T) {
	useServer(t, closedURL(t))
	app := &App{Hooks: Hooks{Daemon: func() (string, error) {
		t.Error("started the local daemon although WITHRUNTIME_BASE_URL is set")
		return "", context.Canceled
	}}}
	code, _, stderr := run(t, app, "sandbox", "run", "--", "true")
	if code != 125 {
		t.Errorf("run: got %d, want 125", code)
	}
	checkStderr(t, stderr, "error: unavailable: POST http://127.0.0.1:...")
	code, _, stderr = run(t, app, "sandbox", "exec", "sbx_a", "--", "true")
	if code != 125 {
		t.Errorf("exec: got %d, want 125", code)
	}
	checkStderr(t, stderr, "error: unavailable: ...")
	code, _, stderr = run(t, app, "sandbox", "ls")
	if code != 1 {
		t.Errorf("ls: got %d, want 1", code)
	}
	checkStderr(t, stderr, "error: unavailable: GET http://127.0.0.1:...")
}

func TestRunFlags(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	code, _, stderr := run(t, nil, "sandbox", "run",
		"--timeout", "15m", "--exec-timeout", "90s", "--vcpus", "1", "--memory=1024",
		"--env", "A=1", "--env", "B=x=y", "--allow", "api.openai.com", "--allow", "*.example.org",
		"--cwd", "/tmp", "--metadata", "team=ml", "--on-lease-end", "pause", "--image", "debian-13",
		"--max-cost", "50000",
		"--", "sh", "-c", "echo $A --json")
	if code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
	created, execs, _ := f.snapshot()
	maxCost := int64(50000)
	wantCreate := api.CreateSandboxRequest{
		Image: "debian-13", VCPUs: 1, MemoryMiB: 1024, TimeoutSeconds: 900, OnLeaseEnd: "pause",
		Env: map[string]string{"A": "1", "B": "x=y"}, Metadata: map[string]string{"team": "ml"},
		Network:       &api.Network{Internet: true, Allow: []string{"api.openai.com", "*.example.org"}},
		MaxCostMicros: &maxCost,
	}
	if !reflect.DeepEqual(created[0], wantCreate) {
		t.Errorf("create:\ngot  %+v\nwant %+v", created[0], wantCreate)
	}
	wantExec := api.ExecRequest{Cmd: api.Command{Argv: []string{"sh", "-c", "echo $A --json"}}, Cwd: "/tmp", TimeoutMs: 90000}
	if !reflect.DeepEqual(execs[0], wantExec) {
		t.Errorf("exec:\ngot  %+v\nwant %+v", execs[0], wantExec)
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"15m", 15 * time.Minute, false},
		{"900", 900 * time.Second, false},
		{"1h30m", 90 * time.Minute, false},
		{"1.5s", 1500 * time.Millisecond, false},
		{"0", 0, true},
		{"-5", 0, true},
		{"-1m", 0, true},
		{"abc", 0, true},
		{"", 0, true},
		{"15", 15 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseDuration(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("got %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	v := durationValue{d: 1500 * time.Millisecond}
	if v.seconds() != 2 || v.millis() != 1500 {
		t.Errorf("1.5s: got %d s, %d ms; want 2 s (rounded up), 1500 ms", v.seconds(), v.millis())
	}
}

func TestExec(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantArgv []string
		wantReq  api.ExecRequest
	}{
		{"flags after id", []string{"sbx_a", "--cwd", "/w", "--env", "X=1", "--exec-timeout", "30", "--", "ls", "-la"},
			[]string{"ls", "-la"}, api.ExecRequest{Cwd: "/w", Env: map[string]string{"X": "1"}, TimeoutMs: 30000}},
		{"flags before id", []string{"--cwd", "/w", "sbx_a", "ls", "-la"},
			[]string{"ls", "-la"}, api.ExecRequest{Cwd: "/w"}},
		{"no flags, no dashes", []string{"sbx_a", "python3", "-c", "print(1)"},
			[]string{"python3", "-c", "print(1)"}, api.ExecRequest{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			useServer(t, f.URL)
			f.events = []api.ExecEvent{{Type: "start"}, {Type: "stdout", Data: "out"}, {Type: "exit", ExitCode: intp(7)}}
			code, stdout, stderr := run(t, nil, append([]string{"sandbox", "exec"}, tt.args...)...)
			if code != 7 || stdout != "out" {
				t.Errorf("got code %d stdout %q stderr %q, want 7 %q", code, stdout, stderr, "out")
			}
			_, execs, stopped := f.snapshot()
			tt.wantReq.Cmd = api.Command{Argv: tt.wantArgv}
			f.mu.Lock()
			id := f.execIDs[0]
			f.mu.Unlock()
			if !reflect.DeepEqual(execs[0], tt.wantReq) || id != "sbx_a" {
				t.Errorf("exec in %s:\ngot  %+v\nwant %+v", id, execs[0], tt.wantReq)
			}
			if len(stopped) != 0 {
				t.Errorf("exec stopped the sandbox: %v", stopped)
			}
		})
	}
}

func TestExecStdin(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	var out, errw bytes.Buffer
	code := (&App{}).Main([]string{"sandbox", "exec", "--stdin", "sbx_a", "--", "cat"}, strings.NewReader("input\n"), &out, &errw)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errw.String())
	}
	if _, execs, _ := f.snapshot(); execs[0].Stdin != "input\n" {
		t.Errorf("stdin: got %q", execs[0].Stdin)
	}
}

func TestOtherCommandsExitOne(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	f.createErr = &api.ErrorDetail{Code: "unauthorized", Message: "bad key"}
	tests := []struct {
		name       string
		args       []string
		wantStdout string
		wantStderr string
	}{
		{"get missing", []string{"sandbox", "get", "sbx_zz"}, "", "error: not_found: no sandbox sbx_zz\n"},
		{"pause missing", []string{"sandbox", "pause", "sbx_zz"}, "", "error: not_found: no sandbox sbx_zz\n"},
		{"create refused", []string{"sandbox", "create"}, "", "error: unauthorized: bad key (set WITHRUNTIME_API_KEY to a key of this server)\n"},
		{"rm one missing", []string{"sandbox", "rm", "sbx_zz", "sbx_a"}, "sbx_a\n", "error: not_found: no sandbox sbx_zz\n"},
		{"stop one missing", []string{"sandbox", "stop", "sbx_zz", "sbx_a"}, "sbx_a\n", "error: not_found: no sandbox sbx_zz\n"},
		{"nil serve hook", []string{"serve", "--data-dir", "/x"}, "", "error: not_supported: ..."},
		{"nil setup hook", []string{"setup"}, "", "error: not_supported: ..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, nil, tt.args...)
			if code != 1 {
				t.Errorf("exit code: got %d, want 1", code)
			}
			if stdout != tt.wantStdout {
				t.Errorf("stdout: got %q, want %q", stdout, tt.wantStdout)
			}
			checkStderr(t, stderr, tt.wantStderr)
		})
	}
}

func TestPlainOutput(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	tests := []struct {
		name string
		args []string
		want string // the fields of one line of stdout
	}{
		{"ls header", []string{"sandbox", "ls"}, "ID STATE VCPUS MEMORY LEASE-ENDS END-REASON COST-USD"},
		{"ls running", []string{"sandbox", "ls"}, "sbx_a running 2 4096MiB " + lease.Local().Format(time.RFC3339) + " - 0.001234"},
		{"ls -a ended", []string{"sandbox", "ls", "-a"}, "sbx_b ended 1 512MiB - lease_ended 31.250000"},
		{"get", []string{"sandbox", "get", "sbx_b"}, "End reason: lease_ended"},
		{"get cost running", []string{"sandbox", "get", "sbx_a"}, "Cost: 0.001234 USD so far"},
		{"get cost ended", []string{"sandbox", "get", "sbx_b"}, "Cost: 31.250000 USD"},
		{"get usage", []string{"sandbox", "get", "sbx_a"}, "Usage: 90.0 s running, 12.5 CPU-s, 360.0 GiB-s of memory"},
		{"get metadata", []string{"sandbox", "get", "sbx_a"}, "Metadata: k=v"},
		{"create", []string{"sandbox", "create", "--timeout", "60"}, "sbx_new"},
		{"pause", []string{"sandbox", "pause", "sbx_a"}, "sbx_a"},
		{"resume", []string{"sandbox", "resume", "sbx_a"}, "sbx_a"},
		{"rm", []string{"sandbox", "rm", "sbx_a", "sbx_new"}, "sbx_new"},
		{"stop", []string{"sandbox", "stop", "sbx_a", "sbx_new"}, "sbx_new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, nil, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, line := range strings.Split(stdout, "\n") {
				if strings.Join(strings.Fields(line), " ") == tt.want {
					return
				}
			}
			t.Errorf("no line of %q reads %q", stdout, tt.want)
		})
	}
}

func TestJSONOutput(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)

	code, stdout, stderr := run(t, nil, "sandbox", "get", "sbx_a", "--json")
	if code != 0 {
		t.Fatalf("get: exit %d: %s", code, stderr)
	}
	var s api.Sandbox
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("get --json: %v in %q", err, stdout)
	}
	if !reflect.DeepEqual(s, f.sandboxes["sbx_a"]) {
		t.Errorf("get --json: got %+v, want %+v", s, f.sandboxes["sbx_a"])
	}
	if !strings.Contains(stdout, "\n  \"id\": \"sbx_a\"") {
		t.Errorf("get --json is not indented: %q", stdout)
	}

	code, stdout, _ = run(t, nil, "sandbox", "ls", "--all", "--json")
	var l api.SandboxList
	if err := json.Unmarshal([]byte(stdout), &l); err != nil || code != 0 || len(l.Sandboxes) != 2 {
		t.Errorf("ls --json: exit %d, %v, %q", code, err, stdout)
	}

	code, stdout, _ = run(t, nil, "sandbox", "create", "--json")
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || code != 0 || s.ID != "sbx_new" {
		t.Errorf("create --json: exit %d, %v, %q", code, err, stdout)
	}

	f.events = []api.ExecEvent{{Type: "start", Pid: 9}, {Type: "stdout", Data: "42\n"}, {Type: "stderr", Data: "e"}, {Type: "exit", ExitCode: intp(5), DurationMs: 12}}
	code, stdout, stderr = run(t, nil, "sandbox", "run", "--json", "--", "python3", "-c", "print(42)")
	if code != 5 || stderr != "" {
		t.Errorf("run --json: exit %d stderr %q, want 5 and nothing", code, stderr)
	}
	var r execJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("run --json: %v in %q", err, stdout)
	}
	want := execJSON{SandboxID: "sbx_new", Pid: 9, ExitCode: intp(5), Stdout: "42\n", Stderr: "e", DurationMs: 12}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("run --json: got %+v, want %+v", r, want)
	}
}

func TestUsage(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // prefix
		wantStderr string // substring
	}{
		{"no arguments", nil, 2, "", "usage: withruntime COMMAND"},
		{"help", []string{"--help"}, 0, "usage: withruntime COMMAND", ""},
		{"help word", []string{"help"}, 0, "usage: withruntime COMMAND", ""},
		{"version", []string{"version"}, 0, "withruntime 0.0.0-dev", ""},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"sandbox alone", []string{"sandbox"}, 2, "", "usage: withruntime sandbox COMMAND"},
		{"sandbox help", []string{"sandbox", "--help"}, 0, "usage: withruntime sandbox COMMAND", ""},
		{"unknown verb", []string{"sandbox", "frobnicate"}, 2, "", `error: invalid_request: unknown command "sandbox frobnicate"` + "\n"},
		{"misspelt verb", []string{"sandbox", "stopp"}, 2, "", `error: invalid_request: unknown command "sandbox stopp"; did you mean "sandbox stop"?` + "\n"},
		{"misspelt verb with flags", []string{"sandbox", "stopp", "--json", "sbx_a"}, 2, "", `unknown command "sandbox stopp"; did you mean "sandbox stop"?`},
		{"misspelt noun", []string{"sandbx", "ls"}, 2, "", `error: invalid_request: unknown command "sandbx"; did you mean "sandbox"?`},
		{"verb without noun", []string{"create"}, 2, "", `error: invalid_request: unknown command "create"; did you mean "sandbox create"?`},
		{"verb without noun with a flag", []string{"create", "--isolation", "microvm"}, 2, "", `error: invalid_request: unknown command "create"; did you mean "sandbox create"?`},
		{"misspelt verb without noun", []string{"exce"}, 2, "", `did you mean "sandbox exec"?`},
		{"run help", []string{"sandbox", "run", "--help"}, 0, "usage: withruntime sandbox run [flags] -- CMD", ""},
		{"run without command", []string{"sandbox", "run", "--vcpus", "1"}, 2, "", "no command given"},
		{"run bad flag", []string{"sandbox", "run", "--bogus", "--", "true"}, 2, "", "sandbox run: unknown flag: --bogus"},
		{"create bad flag", []string{"sandbox", "create", "--bogus"}, 2, "", "sandbox create: unknown flag: --bogus"},
		{"run bad timeout", []string{"sandbox", "run", "--timeout", "soon", "--", "true"}, 2, "", "want seconds or a duration"},
		{"run bad env", []string{"sandbox", "run", "--env", "NOEQUALS", "--", "true"}, 2, "", "want KEY=VALUE"},
		{"run bad on-lease-end", []string{"sandbox", "run", "--on-lease-end", "explode", "--", "true"}, 2, "", "want stop or pause"},
		{"exec without id", []string{"sandbox", "exec"}, 2, "", "no sandbox ID given"},
		{"exec without command", []string{"sandbox", "exec", "sbx_a", "--cwd", "/"}, 2, "", "no command given"},
		{"exec -it without a terminal", []string{"sandbox", "exec", "-it", "sbx_a", "--", "sh"}, 2, "", "the input device is not a terminal"},
		{"exec -t without command", []string{"sandbox", "exec", "-t", "sbx_a"}, 2, "", "no command given"},
		{"exec -t with -d", []string{"sandbox", "exec", "-t", "-d", "sbx_a", "--", "sh"}, 2, "", "-t is interactive"},
		{"shell without a terminal", []string{"sandbox", "shell", "sbx_a"}, 2, "", "the input device is not a terminal"},
		{"shell without id", []string{"sandbox", "shell"}, 2, "", "no sandbox ID given"},
		{"shell two ids", []string{"sandbox", "shell", "a", "b"}, 2, "", "takes one sandbox ID"},
		{"get without id", []string{"sandbox", "get"}, 2, "", "want one sandbox ID"},
		{"get two ids", []string{"sandbox", "get", "a", "b"}, 2, "", "want one sandbox ID"},
		{"rm without id", []string{"sandbox", "rm"}, 2, "", "want at least one sandbox ID"},
		{"stop without id", []string{"sandbox", "stop"}, 2, "", "sandbox stop: want at least one sandbox ID"},
		{"stop bad flag usage line", []string{"sandbox", "stop", "--bogus"}, 2, "", "(\"withruntime sandbox stop --help\" lists the flags)"},
		{"sandbox help lists stop", []string{"sandbox", "--help"}, 0, "usage: withruntime sandbox COMMAND", ""},
		{"stop help names rm", []string{"sandbox", "stop", "--help"}, 0, "usage: withruntime sandbox stop [--json] ID...", ""},
		{"top-level bad flag", []string{"--bogus"}, 2, "", "withruntime: unknown flag: --bogus\nusage: withruntime COMMAND [ARGS] (\"withruntime --help\" lists the commands)\n"},
		{"ls with argument", []string{"sandbox", "ls", "x"}, 2, "", `unexpected argument "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, nil, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code: got %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if !strings.HasPrefix(stdout, tt.wantStdout) {
				t.Errorf("stdout: got %q, want it to start %q", stdout, tt.wantStdout)
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr: got %q, want it to contain %q", stderr, tt.wantStderr)
			}
			if tt.wantCode == 2 && !strings.Contains(stderr, "usage: ") {
				t.Errorf("usage error without a usage line: %q", stderr)
			}
		})
	}
	if _, execs, _ := f.snapshot(); len(execs) != 0 {
		t.Errorf("a usage error reached the server: %+v", execs)
	}
	// No usage error names the program twice.
	for _, args := range [][]string{{"--bogus"}, {"sandbox", "stop", "--bogus"}, {"version", "x"}} {
		_, _, stderr := run(t, nil, args...)
		if strings.Contains(stderr, "withruntime withruntime") {
			t.Errorf("%v: the program named twice: %q", args, stderr)
		}
	}
	// sandbox --help lists stop, with rm as its alias; stop --help says rm.
	_, stdout, _ := run(t, nil, "sandbox", "--help")
	if !strings.Contains(stdout, "  stop ") || !strings.Contains(stdout, "also: rm") {
		t.Errorf("sandbox --help does not list stop (also: rm): %q", stdout)
	}
	_, stdout, _ = run(t, nil, "sandbox", "stop", "--help")
	if !strings.Contains(stdout, "also: rm") {
		t.Errorf("sandbox stop --help does not name rm: %q", stdout)
	}
}

func TestHooks(t *testing.T) {
	var got []string
	app := &App{Version: "v1.2.3", Hooks: Hooks{
		Serve: func(fs *pflag.FlagSet) func([]string) int {
			dir := fs.String("data-dir", "", "")
			return func(args []string) int { got = append([]string{*dir}, args...); return 7 }
		},
		Setup: func(*pflag.FlagSet) func([]string) int { return func([]string) int { return 0 } },
	}}
	if code, _, _ := run(t, app, "serve", "--data-dir", "/d"); code != 7 || !reflect.DeepEqual(got, []string{"/d"}) {
		t.Errorf("serve: got code %d args %v, want 7 [/d]", code, got)
	}
	if code, _, _ := run(t, app, "setup"); code != 0 {
		t.Errorf("setup: got %d", code)
	}
	if _, stdout, _ := run(t, app, "version"); stdout != "withruntime v1.2.3\n" {
		t.Errorf("version: got %q", stdout)
	}
}

// useLocalDaemon unsets the server and key and gives the local daemon's
// data dir and the configuration a directory of their own; it returns the
// data dir.
func useLocalDaemon(t *testing.T) string {
	t.Helper()
	t.Setenv(client.EnvBaseURL, "")
	t.Setenv(client.EnvAPIKey, "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	return filepath.Join(data, "withruntime")
}

func TestLocalDaemonDefault(t *testing.T) {
	noDaemon := func(t *testing.T) func() (string, error) {
		return func() (string, error) {
			t.Error("started the local daemon although the default address answers")
			return "", context.Canceled
		}
	}

	t.Run("server on the default address", func(t *testing.T) {
		useLocalDaemon(t)
		f := newFakeServer(t)
		app := &App{defaultBaseURL: f.URL, Hooks: Hooks{Daemon: noDaemon(t)}}
		if code, _, stderr := run(t, app, "sandbox", "ls"); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if n := len(f.auth()); n != 2 { // health, then the list
			t.Errorf("requests on the default address: got %d, want 2", n)
		}
	})

	t.Run("the daemon's admin key", func(t *testing.T) {
		dir := useLocalDaemon(t)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "admin.key"), []byte("wr_local_admin\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f := newFakeServer(t)
		app := &App{defaultBaseURL: f.URL, Hooks: Hooks{Daemon: noDaemon(t)}}
		if code, _, stderr := run(t, app, "sandbox", "run", "--trial", "--", "true"); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if got := f.auth(); got[len(got)-1] != "Bearer wr_local_admin" {
			t.Errorf("authorization: got %q, want the admin key", got)
		}
		if n, _ := f.trialCalls(); n != 0 {
			t.Errorf("asked for a trial key although the admin key is there")
		}
	})

	t.Run("no daemon in this build", func(t *testing.T) {
		useLocalDaemon(t)
		app := &App{defaultBaseURL: closedURL(t)}
		code, _, stderr := run(t, app, "sandbox", "run", "--", "true")
		if code != 125 {
			t.Errorf("run: got %d, want 125", code)
		}
		checkStderr(t, stderr, "error: unavailable: nothing answers on http://127.0.0.1:...")
		if code, _, _ := run(t, app, "sandbox", "ls"); code != 1 {
			t.Errorf("ls: got %d, want 1", code)
		}
	})

	t.Run("the daemon fails", func(t *testing.T) {
		dir := useLocalDaemon(t)
		app := &App{defaultBaseURL: closedURL(t), Hooks: Hooks{Daemon: func() (string, error) { return "/bin/false", nil }}}
		code, _, stderr := run(t, app, "sandbox", "run", "--", "true")
		if code != 125 {
			t.Errorf("run: got %d, want 125", code)
		}
		log := filepath.Join(dir, "daemon.log")
		for _, want := range []string{"started the local daemon", "error: unavailable: the local daemon exited", log} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr: got %q, want it to contain %q", stderr, want)
			}
		}
		if b, err := os.ReadFile(log); err != nil || !strings.Contains(string(b), "/bin/false serve --listen 127.0.0.1:") {
			t.Errorf("daemon log: got %q (%v), want the command started", b, err)
		}
	})
}
