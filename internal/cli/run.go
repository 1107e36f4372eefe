package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// stopTimeout bounds stopping the sandbox of "sandbox run" once the
// command is done or interrupted.
const stopTimeout = 30 * time.Second

// execFlags are the flags of one command run (run and exec).
type execFlags struct {
	cwd         string
	env         mapValue // exec only: run sets the sandbox's environment
	execTimeout durationValue
	stdin       bool
	user        string
	json        bool
	detach      bool // exec only: start the command in the background
}

func (f *execFlags) register(fs *pflag.FlagSet, withEnv bool) {
	fs.StringVar(&f.cwd, "cwd", "", "run the command in `DIR` (relative to /workspace; default /workspace)")
	if withEnv {
		f.env = mapValue{}
		fs.VarP(f.env, "env", "e", "set `KEY=VALUE` in the command's environment (repeatable)")
		fs.BoolVarP(&f.detach, "detach", "d", false, "start the command in the background, print its PID and exit (--json: print the process)")
	}
	fs.Var(&f.execTimeout, "exec-timeout", "kill the command after `SECONDS` or a duration such as 90s (default: the lease bounds it)")
	fs.BoolVar(&f.stdin, "stdin", false, "send this program's standard input (read to its end first, as text) to the command; without it, standard input is sent when it is a pipe or a file (as docker exec -i), never a terminal or /dev/null")
	fs.StringVarP(&f.user, "user", "u", "", "run the command as `USER`: user (the default) or root")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON at the end instead of streaming the output")
}

func (f *execFlags) request(s streams, argv []string) (api.ExecRequest, error) {
	req := api.ExecRequest{
		Cmd:       api.Command{Argv: argv},
		Cwd:       f.cwd,
		TimeoutMs: f.execTimeout.millis(),
		User:      f.user,
	}
	if len(f.env) > 0 {
		req.Env = f.env
	}
	if (f.stdin || stdinIsData(s.stdin)) && s.stdin != nil {
		b, err := io.ReadAll(s.stdin)
		if err != nil {
			return req, fmt.Errorf("reading stdin: %w", err)
		}
		req.Stdin = string(b)
	}
	return req, nil
}

// stdinIsData reports whether r is a pipe or a regular file, whose
// contents are sent to the command without --stdin: a terminal, /dev/null
// or another device is not read (reading a terminal would wait for input).
func stdinIsData(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok || f == nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	m := fi.Mode()
	return m&os.ModeNamedPipe != 0 || m.IsRegular()
}

const commandAbout = `The command is an argv list, never parsed by a shell: everything after "--"
is passed as it is. For shell syntax, run a shell: -- sh -c 'cd src && make'.`

const runAbout = `Creates a sandbox, runs CMD in it with its output streamed as it is produced,
then stops the sandbox (also on Ctrl-C). Exits with CMD's exit code, 124 when
--exec-timeout killed it (saying so on stderr), and 125 when the platform fails.

` + commandAbout

func (a *App) sandboxRun(cmd *command, s streams) runFunc {
	var cf createFlags
	cf.register(cmd.fs)
	var ef execFlags
	ef.register(cmd.fs, false)
	return func(ctx context.Context, args []string) int {
		if ok, code := cmd.parse(s, args); !ok {
			return code
		}
		req, code, ok := ef.commandRequest(cmd, s)
		if !ok {
			return code
		}

		c, sbx, done, err := a.createSandbox(ctx, s, &cf)
		if err != nil {
			return failRun(ctx, s, err)
		}
		defer done()
		code = execute(ctx, s, c, sbx.ID, req, ef.json, true)
		stopSandbox(ctx, s, c, sbx.ID)
		return code
	}
}

const execAbout = `Runs CMD in a running sandbox with its output streamed as it is produced.
Exits with CMD's exit code, 124 when --exec-timeout killed it (saying so on
stderr), and 125 when the platform fails.

` + detachAbout + `

` + ttyAbout + `

` + commandAbout

func (a *App) sandboxExec(cmd *command, s streams) runFunc {
	var ef execFlags
	ef.register(cmd.fs, true)
	trial := trialFlag(cmd.fs)
	tty := cmd.fs.BoolP("tty", "t", false, "run CMD on a terminal (see below)")
	interactive := cmd.fs.BoolP("interactive", "i", false, "send what is typed to CMD (with -t), or standard input (alone: as --stdin)")
	return func(ctx context.Context, args []string) int {
		if ok, code := cmd.parse(s, args); !ok {
			return code
		}
		rest := cmd.fs.Args()
		if len(rest) == 0 {
			return cmd.usageError(s, "no sandbox ID given")
		}
		id := rest[0]
		if ok, code := cmd.parse(s, rest[1:]); !ok {
			return code
		}
		if *tty {
			if len(cmd.fs.Args()) == 0 {
				return cmd.usageError(s, "no command given")
			}
			if ef.detach || ef.json || ef.stdin {
				return cmd.usageError(s, "-t is interactive: -d, --json and --stdin do not go with it")
			}
			c, done, _, err := a.connectTrial(ctx, s, *trial, false)
			if err != nil {
				return failRun(ctx, s, err)
			}
			defer done()
			return a.runTerminal(ctx, cmd, s, c, id, cmd.fs.Args(), &ef, *interactive)
		}
		if *interactive {
			ef.stdin = true
		}
		req, code, ok := ef.commandRequest(cmd, s)
		if !ok {
			return code
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			return failRun(ctx, s, err)
		}
		defer done()
		if ef.detach {
			return startDetached(ctx, s, c, id, req, ef.json)
		}
		return execute(ctx, s, c, id, req, ef.json, false)
	}
}

// execJSON is what run and exec print with --json.
type execJSON struct {
	SandboxID       string `json:"sandbox_id"`
	Pid             int    `json:"pid,omitempty"`
	ExitCode        *int   `json:"exit_code"`
	TimedOut        bool   `json:"timed_out"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	DurationMs      int64  `json:"duration_ms"`
}

// execute runs req in sandbox id and returns the exit code of run and exec
// (run: true for run, whose sandbox ends with the command).
func execute(ctx context.Context, s streams, c *client.Client, id string, req api.ExecRequest, asJSON, run bool) int {
	watch := &netWatch{w: s.stderr}
	opts := client.ExecOptions{Stdout: s.stdout, Stderr: watch}
	if asJSON {
		opts = client.ExecOptions{}
	}
	res, err := c.Exec(ctx, id, req, opts)
	if err != nil {
		return failRun(ctx, s, err)
	}
	if res.TimedOut {
		// Not "error: CODE: ...": the platform did what it was asked. The
		// line says why the exit code is 124 and not the command's.
		after := ""
		if req.TimeoutMs > 0 {
			after = " after " + (time.Duration(req.TimeoutMs) * time.Millisecond).String()
		}
		fmt.Fprintf(s.stderr, "withruntime: the command was killed by --exec-timeout%s\n", after)
	}
	if asJSON {
		out := execJSON{
			SandboxID:       id,
			Pid:             res.Pid,
			TimedOut:        res.TimedOut,
			Stdout:          res.Stdout,
			Stderr:          res.Stderr,
			StdoutTruncated: res.StdoutTruncated,
			StderrTruncated: res.StderrTruncated,
			DurationMs:      res.Duration.Milliseconds(),
		}
		if res.ExitCode >= 0 {
			out.ExitCode = &res.ExitCode
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintf(s.stdout, "%s\n", b)
		watch.see([]byte(res.Stderr))
	}
	networkOffHint(ctx, s, c, id, watch, exitCode(res), run)
	return exitCode(res)
}

// exitCode maps a command's end to this program's exit code: 124 when its
// timeout killed it, whatever the signal's code (137 for SIGKILL) says, as
// GNU timeout does. A code the shell cannot carry (none, negative, above
// 255) becomes 1, so that a failure never reads as success.
func exitCode(res *client.ExecResult) int {
	switch {
	case res.TimedOut:
		return exitTimedOut
	case res.ExitCode >= 0 && res.ExitCode <= 255:
		return res.ExitCode
	}
	return exitFailure
}

// failRun reports a failure of run or exec and returns its exit code: 125,
// or 128+N when signal N interrupted the command (silently for a closed
// stdout, as for any program that dies of SIGPIPE).
func failRun(ctx context.Context, s streams, err error) int {
	if errors.Is(err, syscall.EPIPE) {
		return 128 + int(syscall.SIGPIPE)
	}
	if ctx.Err() != nil {
		printError(s.stderr, client.CodeCanceled, context.Cause(ctx).Error())
		if code := signalExitCode(ctx); code != 0 {
			return code
		}
		return 128 + int(syscall.SIGINT)
	}
	report(s.stderr, err)
	return exitPlatform
}

// stopSandbox stops the sandbox of "sandbox run", even when ctx has ended.
// A failure is a warning: the command's exit code stands, and the lease
// still bounds the sandbox.
func stopSandbox(ctx context.Context, s streams, c *client.Client, id string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	_, err := c.StopSandbox(sctx, id)
	if err == nil || errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrLeaseEnded) {
		return
	}
	code, msg := errorCode(err)
	fmt.Fprintf(s.stderr, "warning: %s: stopping sandbox %s: %s\n", code, id, msg)
}

// commandRequest is the exec request of the command left after the
// flags, or the exit code of a missing command or a bad flag value.
func (f *execFlags) commandRequest(cmd *command, s streams) (api.ExecRequest, int, bool) {
	argv := cmd.fs.Args()
	if len(argv) == 0 {
		return api.ExecRequest{}, cmd.usageError(s, "no command given"), false
	}
	if err := api.CheckUser(f.user); err != nil {
		return api.ExecRequest{}, cmd.usageError(s, "--user: %v", err), false
	}
	req, err := f.request(s, argv)
	if err != nil {
		report(s.stderr, err)
		return api.ExecRequest{}, exitPlatform, false
	}
	return req, 0, true
}
