package e2bcompat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	pb "github.com/withruntime/withruntime/internal/e2bcompat/proto/process"
	"github.com/withruntime/withruntime/internal/e2bcompat/proto/process/processconnect"
)

// Bounds of the process service: a request message (a StreamInput
// message too), and the keepalive interval a client may ask for.
const (
	maxProcessRequest = 1 << 20
	procMinKeepalive  = time.Second
	procMaxKeepalive  = 50 * time.Second
	// procKeepalive applies when the client asks for none.
	procKeepalive = 30 * time.Second
)

func init() { envdRoutes = append(envdRoutes, registerProcess) }

func registerProcess(s *Server, mux *http.ServeMux) {
	p, h := processconnect.NewProcessHandler(&processService{s: s}, connect.WithReadMaxBytes(maxProcessRequest), noCompression, connect.WithInterceptors(ctxCodes{}))
	mux.Handle(p, connectStatus(h, maxProcessRequest))
}

// processService is envd's process.Process over withruntime's exec API:
// every command is a background process, and a Start or Connect stream
// follows its output. Leaving the stream (a disconnect, the client's
// deadline) never ends the process, as E2B's clients expect.
type processService struct {
	s *Server
}

var _ processconnect.ProcessHandler = (*processService)(nil)

func (p *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return err
	}
	er, err := execRequest(sb.User, req.Msg.GetProcess(), req.Msg.GetStdin())
	if err != nil {
		return err
	}
	if pty := req.Msg.GetPty(); pty != nil {
		// A terminal: its output comes as pty data, its input through
		// SendInput's pty, its size through Update.
		size := pty.GetSize()
		er.Pty = &api.PtySize{Cols: int(size.GetCols()), Rows: int(size.GetRows())}
		if size == nil {
			er.Pty = &api.PtySize{Cols: 80, Rows: 24}
		}
		if err := er.Pty.Check(); err != nil {
			return connect.NewError(connect.CodeInvalidArgument, err)
		}
	}
	if req.Msg.GetProcess().GetCwd() == "" {
		if wd := templateWorkdir(ctx, sb); wd != "" {
			er.Cwd = wd
		}
	}
	proc, err := sb.C.StartProcess(ctx, sb.ID, er)
	if err != nil {
		return connectError(err)
	}
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.StartResponse{Event: ev}) }
	if proc.Pid == 0 {
		// It could not start (not found, not executable): envd's answer is
		// an ended process with the reason on stderr.
		return notStarted(proc, send)
	}
	return follow(ctx, sb, proc.Pid, er.Pty != nil, procKeepaliveOf(req.Header()), send)
}

func (p *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return err
	}
	pid, err := selectedPid(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	proc, err := sb.C.GetProcess(ctx, sb.ID, pid)
	if err != nil {
		return connectError(err)
	}
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.ConnectResponse{Event: ev}) }
	return follow(ctx, sb, pid, proc.Pty, procKeepaliveOf(req.Header()), send)
}

// execRequest is the background exec a ProcessConfig asks for, as user:
// argv cmd and args, envs, cwd against the user's home (the default).
func execRequest(user string, cfg *pb.ProcessConfig, stdin bool) (api.ExecRequest, error) {
	if cfg == nil || cfg.Cmd == "" {
		return api.ExecRequest{}, connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	return api.ExecRequest{
		Cmd:        api.Command{Argv: append([]string{cfg.Cmd}, cfg.Args...)},
		Cwd:        resolvePath(user, cfg.GetCwd()),
		Env:        cfg.Envs,
		Background: true,
		User:       user,
		KeepStdin:  stdin,
	}, nil
}

// templateWorkdir is the working directory of sb's template, where E2B
// runs a command that names none ("" for the built-in image, whose
// commands run in the user's home, or a template that sets none).
func templateWorkdir(ctx context.Context, sb *Sandbox) string {
	if templates[sb.Template] || sb.Template == "default" {
		return ""
	}
	t, err := sb.C.GetTemplate(ctx, sb.Template)
	if err != nil {
		return "" // deleted since: the home, as for any sandbox
	}
	return t.Defaults.Workdir
}

// selectedPid is the pid a selector names; withruntime keeps no tags.
func selectedPid(sel *pb.ProcessSelector) (int, error) {
	if sel == nil {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector is required"))
	}
	if _, ok := sel.Selector.(*pb.ProcessSelector_Tag); ok {
		return 0, connect.NewError(connect.CodeNotFound, errors.New("withruntime's E2B API keeps no process tags: select the process by pid"))
	}
	if sel.GetPid() == 0 {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("process pid is required"))
	}
	return int(sel.GetPid()), nil
}

// procKeepaliveOf is the interval of keepalive events the request asks for in
// Keepalive-Ping-Interval (seconds), within bounds.
func procKeepaliveOf(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval"))
	if err != nil || n <= 0 {
		return procKeepalive
	}
	return min(max(time.Duration(n)*time.Second, procMinKeepalive), procMaxKeepalive)
}

// notStarted tells of a command that never started, as envd would.
func notStarted(proc *api.Process, send func(*pb.ProcessEvent) error) error {
	code := -1
	if proc.ExitCode != nil {
		code = *proc.ExitCode
	}
	evs := []*pb.ProcessEvent{startEvent(0)}
	if proc.Stderr != "" {
		evs = append(evs, dataEvent([]byte(proc.Stderr), true))
	}
	evs = append(evs, endEvent(code))
	for _, ev := range evs {
		if err := send(ev); err != nil {
			return err
		}
	}
	return nil
}

// follow streams process pid's events through send: start, its output
// (what is kept, then live; a terminal's as pty data), keepalives every
// interval, and one end. It returns when the process has ended, or when
// the client leaves; the process runs on either way.
func follow(ctx context.Context, sb *Sandbox, pid int, pty bool, interval time.Duration, send func(*pb.ProcessEvent) error) error {
	reqCtx := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex // serializes sends; guards sendErr
		sendErr error
	)
	emit := func(ev *pb.ProcessEvent) {
		mu.Lock()
		defer mu.Unlock()
		if sendErr != nil {
			return
		}
		if sendErr = send(ev); sendErr != nil {
			cancel() // the client is gone: stop following
		}
	}
	emit(startEvent(pid))
	keepalives := make(chan struct{})
	go func() {
		defer close(keepalives)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				emit(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}})
			}
		}
	}()
	res, err := sb.C.FollowProcess(ctx, sb.ID, pid, client.FollowOptions{}, client.ExecOptions{
		Stdout: outputWriter{emit: emit, kind: outStdout(pty)},
		Stderr: outputWriter{emit: emit, kind: outStderr},
	})
	// The keepalives stop, and their goroutine is gone, before the end
	// event: none follows it, nor the handler's return.
	cancel()
	<-keepalives
	mu.Lock()
	defer mu.Unlock()
	if sendErr != nil {
		return sendErr
	}
	if err != nil {
		if reqCtx.Err() == nil {
			if state, ok := gone(reqCtx, sb); ok {
				// E2B's daemon goes with its sandbox and the stream ends
				// unavailable; E2B's clients then ask /health, hear the
				// sandbox is not found, and report it killed.
				return connect.NewError(connect.CodeUnavailable, fmt.Errorf("the sandbox was killed or reached its end of life while process %d ran (sandbox %s is %s)", pid, sb.ID, state))
			}
		}
		return connectError(err)
	}
	return send(endEvent(res.ExitCode))
}

// gone says whether sb no longer runs (ended, or paused), as the API
// reports it once a call into it broke, and its state then. A sandbox
// being stopped still reads running while its agent is already gone, so a
// running one is asked again for up to settleWait.
func gone(ctx context.Context, sb *Sandbox) (string, bool) {
	deadline := time.Now().Add(settleWait)
	for {
		info, err := sb.C.GetSandbox(ctx, sb.ID)
		switch {
		case err != nil:
			return "gone", isNotFound(err)
		case info.State != "running" && info.State != "starting":
			return info.State, true
		case time.Now().After(deadline):
			return info.State, false
		}
		select {
		case <-ctx.Done():
			return info.State, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settleWait is how long gone waits for a sandbox whose call broke to
// leave the running state.
const settleWait = 3 * time.Second

// outKind is the stream a data event carries.
type outKind int

const (
	outStdoutKind outKind = iota
	outStderr
	outPty
)

// outStdout is the kind of a process's stdout: a terminal's when pty.
func outStdout(pty bool) outKind {
	if pty {
		return outPty
	}
	return outStdoutKind
}

// outputWriter sends each write as a data event of its kind.
type outputWriter struct {
	emit func(*pb.ProcessEvent)
	kind outKind
}

func (w outputWriter) Write(b []byte) (int, error) {
	// A copy: a writer must not keep what it is passed.
	b = append([]byte(nil), b...)
	if w.kind == outPty {
		w.emit(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Pty{Pty: b}}}})
	} else {
		w.emit(dataEvent(b, w.kind == outStderr))
	}
	return len(b), nil
}

func startEvent(pid int) *pb.ProcessEvent {
	return &pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: uint32(pid)}}}
}

func dataEvent(b []byte, stderr bool) *pb.ProcessEvent {
	d := &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stdout{Stdout: b}}
	if stderr {
		d.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: b}
	}
	return &pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: d}}
}

// endEvent is how a process with exit code code ended, in envd's words
// (Go's "exit status N"). withruntime reports a death by signal n as
// 128+n, as a shell does, and so does this.
func endEvent(code int) *pb.ProcessEvent {
	status := fmt.Sprintf("exit status %d", code)
	end := &pb.ProcessEvent_EndEvent{ExitCode: int32(code), Exited: true, Status: status}
	if code != 0 {
		end.Error = &status
	}
	return &pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}}
}
