package mcptools

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// ExecInput is sandbox_exec's arguments: runtime_exec's, with the sandbox.
type ExecInput struct {
	SandboxID      string `json:"sandbox_id"`
	Command        string `json:"command"`
	Cwd            string `json:"cwd,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

// ExecOutput is runtime_exec's result.
type ExecOutput struct {
	ExitCode int    `json:"exit_code" jsonschema:"The command's exit code; -1 when it has none (killed)."`
	Stdout   string `json:"stdout" jsonschema:"The last 20000 characters of stdout, with a note when cut."`
	Stderr   string `json:"stderr" jsonschema:"The last 20000 characters of stderr, with a note when cut."`
	TimedOut bool   `json:"timed_out" jsonschema:"Whether timeout_seconds killed the command."`
}

func (t tools) addExecTools(s *mcp.Server) {
	add(s, t, tool("sandbox_exec", nil), runExec)
}

func runExec(ctx context.Context, c *client.Client, in ExecInput) (ExecOutput, error) {
	if err := needID(in.SandboxID); err != nil {
		return ExecOutput{}, err
	}
	if in.Command == "" {
		return ExecOutput{}, invalid("command is empty")
	}
	timeoutMs, err := callTimeoutMs(in.TimeoutSeconds)
	if err != nil {
		return ExecOutput{}, err
	}
	var stdout, stderr tailWriter
	res, err := c.Exec(ctx, in.SandboxID, api.ExecRequest{
		Cmd:       api.Command{Shell: in.Command},
		Cwd:       in.Cwd,
		TimeoutMs: timeoutMs,
	}, client.ExecOptions{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		return ExecOutput{}, err
	}
	return ExecOutput{
		ExitCode: res.ExitCode,
		Stdout:   keepTail(string(stdout.buf), stdout.cut, OutputCap, "stdout"),
		Stderr:   keepTail(string(stderr.buf), stderr.cut, OutputCap, "stderr"),
		TimedOut: res.TimedOut,
	}, nil
}

// callTimeoutMs is a tool call's timeout_seconds in milliseconds: absent or 0
// is DefaultTimeoutSeconds, a negative one is refused.
func callTimeoutMs(seconds int) (int64, error) {
	switch {
	case seconds < 0:
		return 0, invalid("timeout_seconds must be positive")
	case seconds == 0:
		seconds = DefaultTimeoutSeconds
	}
	return int64(seconds) * 1000, nil
}
