package e2bcompat

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/agent"
	pb "github.com/withruntime/withruntime/internal/e2bcompat/proto/process"
	"github.com/withruntime/withruntime/internal/e2bcompat/proto/process/processconnect"
)

// procAPI is withruntime's API for sandbox "run" with a real agent behind
// its exec and process routes. It records each exec request, then runs it
// in the agent's workspace (the E2B cwd, a home, does not exist here).
type procAPI struct {
	agent *agent.Server
	ws    string

	mu    sync.Mutex
	execs []api.ExecRequest
}

func newProcAPI(t *testing.T) *procAPI {
	cfg := agent.DefaultConfig()
	cfg.UID, cfg.GID = os.Getuid(), os.Getgid()
	cfg.Workspace = t.TempDir()
	cfg.Home = cfg.Workspace
	a := agent.New(cfg)
	t.Cleanup(a.Close)
	return &procAPI{agent: a, ws: cfg.Workspace}
}

func (p *procAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /v1/sandboxes/{id}", fakeAPI())
	toAgent := func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer wr_good" || r.PathValue("id") != "run" {
			apiError(w, 404, "not_found", "no such sandbox")
			return
		}
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/v1/sandboxes/run")
		if r.URL.Path == "/exec" {
			var req api.ExecRequest
			json.NewDecoder(r.Body).Decode(&req)
			p.mu.Lock()
			p.execs = append(p.execs, req)
			p.mu.Unlock()
			req.Cwd = p.ws
			b, _ := json.Marshal(req)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		p.agent.ServeHTTP(w, r)
	}
	for _, pat := range []string{"POST /v1/sandboxes/{id}/exec", "GET /v1/sandboxes/{id}/processes", "GET /v1/sandboxes/{id}/processes/{pid}",
		"GET /v1/sandboxes/{id}/processes/{pid}/stream", "POST /v1/sandboxes/{id}/processes/{pid}/kill", "POST /v1/sandboxes/{id}/processes/{pid}/stdin"} {
		mux.HandleFunc(pat, toAgent)
	}
	return mux
}

func (p *procAPI) lastExec() api.ExecRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.execs[len(p.execs)-1]
}

// headers adds the sandbox-side headers of sandbox "run" to each request.
type headers struct {
	h    http.Header
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header[k] = v
	}
	return h.next.RoundTrip(r)
}

// newProcClient is an E2B server over a procAPI and a Process client that
// speaks to it as the SDKs do (Connect, JSON), as user when not empty.
func newProcClient(t *testing.T, user string) (processconnect.ProcessClient, *procAPI) {
	t.Helper()
	pa := newProcAPI(t)
	s, err := New(Config{API: pa.handler(), Secret: bytes.Repeat([]byte{5}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	h := http.Header{}
	h.Set(headerSandboxID, "run")
	h.Set(headerSandboxPort, EnvdPort)
	h.Set(headerAccessToken, s.sealToken("run", "wr_good"))
	if user != "" {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	}
	hc := &http.Client{Transport: headers{h, http.DefaultTransport}}
	return processconnect.NewProcessClient(hc, ts.URL, connect.WithProtoJSON()), pa
}

// events reads a Start or Connect stream to its end.
type eventStream interface {
	Receive() bool
	Err() error
	Close() error
}

func collect(t *testing.T, st eventStream, ev func() *pb.ProcessEvent) (pid uint32, stdout, stderr string, end *pb.ProcessEvent_EndEvent, kinds []string) {
	t.Helper()
	for st.Receive() {
		switch e := ev().Event.(type) {
		case *pb.ProcessEvent_Start:
			pid = e.Start.Pid
			kinds = append(kinds, "start")
		case *pb.ProcessEvent_Data:
			stdout += string(e.Data.GetStdout())
			stderr += string(e.Data.GetStderr())
			kinds = append(kinds, "data")
		case *pb.ProcessEvent_End:
			end = e.End
			kinds = append(kinds, "end")
		case *pb.ProcessEvent_Keepalive:
			kinds = append(kinds, "keepalive")
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return pid, stdout, stderr, end, kinds
}

func bashConfig(cmd string) *pb.ProcessConfig {
	return &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", cmd}, Envs: map[string]string{"GREETING": "hi"}}
}

func TestProcessStart(t *testing.T) {
	c, pa := newProcClient(t, "root")
	st, err := c.Start(t.Context(), connect.NewRequest(&pb.StartRequest{Process: bashConfig(`echo "$GREETING"; echo oops >&2; exit 3`)}))
	if err != nil {
		t.Fatal(err)
	}
	pid, stdout, stderr, end, kinds := collect(t, st, func() *pb.ProcessEvent { return st.Msg().Event })
	if kinds[0] != "start" || pid == 0 || kinds[len(kinds)-1] != "end" || strings.Count(strings.Join(kinds, ","), "end") != 1 {
		t.Errorf("got events %v pid %d, want start with a pid first and one end last", kinds, pid)
	}
	if stdout != "hi\n" || stderr != "oops\n" {
		t.Errorf("got stdout %q stderr %q, want the envs applied and both streams", stdout, stderr)
	}
	if end == nil || end.ExitCode != 3 || !end.Exited || end.GetError() != "exit status 3" {
		t.Errorf("got end %v, want exit 3 with its error text", end)
	}
	got := pa.lastExec()
	if got.User != api.UserRoot || got.Cwd != "/root" || !got.Background || got.Cmd.Argv[0] != "/bin/bash" {
		t.Errorf("got exec %+v, want a background bash as root in /root", got)
	}

	c, pa = newProcClient(t, "")
	cfg := bashConfig("true")
	cwd := "project"
	cfg.Cwd = &cwd
	st, err = c.Start(t.Context(), connect.NewRequest(&pb.StartRequest{Process: cfg}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, end, _ := collect(t, st, func() *pb.ProcessEvent { return st.Msg().Event }); end == nil || end.ExitCode != 0 || end.Error != nil {
		t.Errorf("got end %v, want exit 0 and no error", end)
	}
	if got := pa.lastExec(); got.User != api.UserDefault || got.Cwd != "/home/user/project" {
		t.Errorf("got exec user %q cwd %q, want user in /home/user/project", got.User, got.Cwd)
	}

	// A terminal: its size goes to the exec (80x24 when none is given);
	// one out of bounds is refused.
	for _, tc := range []struct {
		pty  *pb.PTY
		want api.PtySize
	}{
		{&pb.PTY{}, api.PtySize{Cols: 80, Rows: 24}},
		{&pb.PTY{Size: &pb.PTY_Size{Cols: 120, Rows: 40}}, api.PtySize{Cols: 120, Rows: 40}},
	} {
		st, err = c.Start(t.Context(), connect.NewRequest(&pb.StartRequest{Process: bashConfig("true"), Pty: tc.pty}))
		if err != nil {
			t.Fatal(err)
		}
		for st.Receive() {
		}
		if got := pa.lastExec(); got.Pty == nil || *got.Pty != tc.want {
			t.Errorf("Start with pty %v: exec pty %v, want %v", tc.pty, got.Pty, tc.want)
		}
	}
	var ce *connect.Error
	st, err = c.Start(t.Context(), connect.NewRequest(&pb.StartRequest{Process: bashConfig("true"), Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 5000, Rows: 1}}}))
	if err == nil {
		st.Receive()
		err = st.Err()
	}
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		t.Errorf("Start with a pty of 5000 columns: got %v, want invalid_argument", err)
	}
}

// TestProcessReattach: the client leaves a stream (its deadline), the
// process runs on, and Connect, SendInput, List and SendSignal reach it.
func TestProcessReattach(t *testing.T) {
	c, _ := newProcClient(t, "")
	stdin := true
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	st, err := c.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: bashConfig("echo ready; read -r l; echo got:$l; sleep 30"), Stdin: &stdin}))
	if err != nil {
		t.Fatal(err)
	}
	var pid uint32
	for st.Receive() {
		if s := st.Msg().Event.GetStart(); s != nil {
			pid = s.Pid
		}
		if string(st.Msg().Event.GetData().GetStdout()) == "ready\n" {
			break
		}
	}
	cancel()
	st.Close()
	if pid == 0 {
		t.Fatalf("no start event: %v", st.Err())
	}
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	if _, err := c.SendInput(t.Context(), connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("x\n")}}})); err != nil {
		t.Fatalf("SendInput after the stream left: %v (the process must run on)", err)
	}
	list, err := c.List(t.Context(), connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Msg.Processes) != 1 || list.Msg.Processes[0].Pid != pid || list.Msg.Processes[0].Config.GetCmd() != "/bin/bash" {
		t.Errorf("got list %v, want the one process with its config", list.Msg.Processes)
	}

	cst, err := c.Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		// The input's echo was due before Connect; give it a moment more,
		// then end the process so that the stream ends.
		time.Sleep(300 * time.Millisecond)
		c.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL}))
	}()
	cpid, stdout, _, end, kinds := collect(t, cst, func() *pb.ProcessEvent { return cst.Msg().Event })
	if cpid != pid || kinds[0] != "start" || stdout != "ready\ngot:x\n" {
		t.Errorf("Connect: got pid %d events %v stdout %q, want start %d and the output", cpid, kinds, stdout, pid)
	}
	if end == nil || end.ExitCode != 128+9 {
		t.Errorf("got end %v, want the kill's 137", end)
	}

	var ce *connect.Error
	_, err = c.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL}))
	if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound {
		t.Errorf("SendSignal to the ended process: got %v, want not_found", err)
	}
	unknown := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: 999999}}
	_, err = c.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: unknown, Signal: pb.Signal_SIGNAL_SIGKILL}))
	if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound {
		t.Errorf("SendSignal to an unknown pid: got %v, want not_found", err)
	}
	_, err = c.CloseStdin(t.Context(), connect.NewRequest(&pb.CloseStdinRequest{Process: unknown}))
	if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound {
		t.Errorf("CloseStdin of an unknown pid: got %v, want not_found", err)
	}
	if _, err = c.Update(t.Context(), connect.NewRequest(&pb.UpdateRequest{Process: sel})); err != nil {
		t.Errorf("Update without a size: %v, want nothing done", err)
	}
}

func TestProcKeepaliveOf(t *testing.T) {
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", procKeepalive},
		{"junk", procKeepalive},
		{"0", procKeepalive},
		{"50", 50 * time.Second},
		{"5", 5 * time.Second},
		{"100000", procMaxKeepalive},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set("Keepalive-Ping-Interval", tt.header)
		if got := procKeepaliveOf(h); got != tt.want {
			t.Errorf("%q: got %v, want %v", tt.header, got, tt.want)
		}
	}
}

func TestProcessInfo(t *testing.T) {
	info := processInfo(api.Process{Pid: 4, Cmd: api.Command{Shell: "ls"}, Cwd: "/w"})
	if info.Config == nil || info.Config.Cmd != "/bin/sh" || strings.Join(info.Config.Args, " ") != "-c ls" || info.Config.GetCwd() != "/w" || info.Pid != 4 {
		t.Errorf("got %v, want /bin/sh -c ls in /w", info)
	}
}

// TestProcessKeepalive: an idle stream carries keepalives at the asked
// interval between start and end.
func TestProcessKeepalive(t *testing.T) {
	c, _ := newProcClient(t, "")
	req := connect.NewRequest(&pb.StartRequest{Process: bashConfig("sleep 2.5")})
	req.Header().Set("Keepalive-Ping-Interval", "1")
	st, err := c.Start(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, end, kinds := collect(t, st, func() *pb.ProcessEvent { return st.Msg().Event })
	got := strings.Join(kinds, ",")
	if !strings.HasPrefix(got, "start,keepalive") || !strings.HasSuffix(got, ",end") || end.ExitCode != 0 {
		t.Errorf("got events %s, want start, keepalives, end", got)
	}
}

// TestProcessSigterm: SIGTERM reaches the process group, and the process
// ends by it (128+15).
func TestProcessSigterm(t *testing.T) {
	c, pa := newProcClient(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	st, err := c.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: bashConfig("exec sleep 30")}))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() || st.Msg().Event.GetStart() == nil {
		t.Fatalf("no start event: %v", st.Err())
	}
	pid := st.Msg().Event.GetStart().Pid
	cancel()
	st.Close()
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	if _, err := c.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGTERM})); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if got := pa.lastExec(); got.TimeoutMs != killTimeout.Milliseconds() {
		t.Errorf("got kill run with timeout_ms %d, want %d", got.TimeoutMs, killTimeout.Milliseconds())
	}
	cst, err := c.Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, end, _ := collect(t, cst, func() *pb.ProcessEvent { return cst.Msg().Event }); end == nil || end.ExitCode != 128+15 {
		t.Errorf("got end %v, want 143 (SIGTERM)", end)
	}
}
