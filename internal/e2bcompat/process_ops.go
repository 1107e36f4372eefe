package e2bcompat

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"connectrpc.com/connect"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	pb "github.com/withruntime/withruntime/internal/e2bcompat/proto/process"
)

// List answers the running processes. withruntime keeps no process's
// envs for others to read: they come back empty.
func (p *processService) List(ctx context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	// Without their output: a listing of many chatty processes stays small.
	procs, err := sb.C.ListProcessesWith(ctx, sb.ID, client.ListProcessesOptions{NoOutput: true, Running: true})
	if err != nil {
		return nil, connectError(err)
	}
	res := &pb.ListResponse{Processes: []*pb.ProcessInfo{}}
	for _, proc := range procs {
		if proc.Running {
			res.Processes = append(res.Processes, processInfo(proc))
		}
	}
	return connect.NewResponse(res), nil
}

// processInfo is proc as envd lists it: config always present.
func processInfo(proc api.Process) *pb.ProcessInfo {
	argv := proc.Cmd.Argv
	if argv == nil {
		argv = []string{"/bin/sh", "-c", proc.Cmd.Shell}
	}
	cfg := &pb.ProcessConfig{Envs: map[string]string{}}
	if len(argv) > 0 {
		cfg.Cmd, cfg.Args = argv[0], append([]string{}, argv[1:]...)
	}
	if proc.Cwd != "" {
		cwd := proc.Cwd
		cfg.Cwd = &cwd
	}
	return &pb.ProcessInfo{Config: cfg, Pid: uint32(proc.Pid)}
}

func (p *processService) SendInput(ctx context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	if err := p.input(ctx, req.Msg.GetProcess(), req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// StreamInput writes each data message to the stdin of the process the
// first message selects, in order.
func (p *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	var sel *pb.ProcessSelector
	for stream.Receive() {
		switch ev := stream.Msg().Event.(type) {
		case *pb.StreamInputRequest_Start:
			sel = ev.Start.GetProcess()
		case *pb.StreamInputRequest_Data:
			if sel == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("stream input: data before the start message"))
			}
			if err := p.input(ctx, sel, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

// input writes in to the stdin of the process sel names.
func (p *processService) input(ctx context.Context, sel *pb.ProcessSelector, in *pb.ProcessInput) error {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return err
	}
	pid, err := selectedPid(sel)
	if err != nil {
		return err
	}
	// A terminal's input is its stdin.
	data := in.GetStdin()
	if pty, ok := in.GetInput().(*pb.ProcessInput_Pty); ok {
		data = pty.Pty
	}
	if err := sb.C.WriteProcessStdin(ctx, sb.ID, pid, data, false); err != nil {
		return connectError(err)
	}
	return nil
}

func (p *processService) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	pid, err := selectedPid(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := sb.C.WriteProcessStdin(ctx, sb.ID, pid, nil, true); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

// SendSignal kills (SIGKILL: the process and its descendants) or
// terminates (SIGTERM, to its process group, as root) a running process.
// One that has ended is not_found, which the clients' kill answers false.
func (p *processService) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	pid, err := selectedPid(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	proc, err := sb.C.GetProcess(ctx, sb.ID, pid)
	if err != nil {
		return nil, connectError(err)
	}
	if !proc.Running {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d has ended", pid))
	}
	switch req.Msg.Signal {
	case pb.Signal_SIGNAL_SIGKILL:
		_, err = sb.C.KillProcess(ctx, sb.ID, pid)
	case pb.Signal_SIGNAL_SIGTERM:
		// Every process withruntime starts leads its own process group.
		var res *client.ExecResult
		var stderr string
		req := api.ExecRequest{Cmd: api.Command{Argv: []string{"kill", "-TERM", "--", "-" + strconv.Itoa(pid)}}, User: api.UserRoot}
		res, stderr, err = runTool(ctx, sb, req, killTimeout)
		if err == nil && res.ExitCode != 0 {
			err = connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d: kill -TERM failed: %s", pid, stderr))
		}
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %v is not supported: send SIGKILL or SIGTERM", req.Msg.Signal))
	}
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

// Update sets the terminal size of a process started with a pty.
func (p *processService) Update(ctx context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	pid, err := selectedPid(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if size := req.Msg.GetPty().GetSize(); size != nil {
		if err := sb.C.ResizeProcess(ctx, sb.ID, pid, int(size.GetCols()), int(size.GetRows())); err != nil {
			return nil, connectError(err)
		}
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}
