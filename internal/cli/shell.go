package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

const shellAbout = `Opens an interactive shell (the user's login shell) on a terminal in a running
sandbox, as "docker exec -it ID sh" does: this terminal is put in raw mode, its
size is followed, Ctrl-C goes to the command in the sandbox, and the shell's
exit code is this program's. It needs a terminal on standard input.

A dropped connection is resumed; the shell runs until it exits, is killed
("sandbox kill ID PID") or the sandbox ends.`

const ttyAbout = `-t runs CMD on a terminal in the sandbox, as docker exec -t does: its output
is the terminal's (CRLF line ends, colors), its size this terminal's (80x24
without one), followed as it changes. -it also sends what is typed, with this
terminal in raw mode, so that Ctrl-C, Ctrl-D and Ctrl-Z go to CMD; it needs a
terminal on standard input, as docker's does. -t alone sends nothing, and
Ctrl-C here ends CMD. -i alone sends standard input to CMD (read to its end
first, as --stdin).`

// sandboxShell is "sandbox shell ID": exec -it with the login shell.
func (a *App) sandboxShell(cmd *command, s streams) runFunc {
	ef := execFlags{env: mapValue{}}
	cmd.fs.StringVar(&ef.cwd, "cwd", "", "start the shell in `DIR` (relative to /workspace; default /workspace)")
	cmd.fs.VarP(ef.env, "env", "e", "set `KEY=VALUE` in the shell's environment (repeatable)")
	cmd.fs.StringVarP(&ef.user, "user", "u", "", "run the shell as `USER`: user (the default) or root")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, args []string) int {
		if ok, code := cmd.parse(s, args); !ok {
			return code
		}
		rest := cmd.fs.Args()
		if len(rest) == 0 {
			return cmd.usageError(s, "no sandbox ID given")
		}
		if len(rest) > 1 {
			return cmd.usageError(s, "sandbox shell takes one sandbox ID; to run a command: sandbox exec -it ID -- CMD")
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			return failRun(ctx, s, err)
		}
		defer done()
		return a.runTerminal(ctx, cmd, s, c, rest[0], nil, &ef, true)
	}
}

// runTerminal runs argv (the login shell when empty) on a terminal in
// sandbox id, relaying this program's terminal to it, and returns the exit
// code: the command's, or 125 when the platform fails.
func (a *App) runTerminal(ctx context.Context, cmd *command, s streams, c *client.Client, id string, argv []string, ef *execFlags, interactive bool) int {
	if err := api.CheckUser(ef.user); err != nil {
		return cmd.usageError(s, "--user: %v", err)
	}
	in, _ := s.stdin.(*os.File)
	out, _ := s.stdout.(*os.File)
	inTerm := in != nil && term.IsTerminal(int(in.Fd()))
	outTerm := out != nil && term.IsTerminal(int(out.Fd()))
	if interactive && !inTerm {
		return cmd.usageError(s, "the input device is not a terminal: use -i without -t to send standard input, or -t alone")
	}
	opts := client.PTYOptions{Cmd: argv, User: ef.user, Cwd: ef.cwd, TimeoutMs: ef.execTimeout.millis()}
	if len(ef.env) > 0 {
		opts.Env = map[string]string(ef.env)
	}
	if t := os.Getenv("TERM"); t != "" && outTerm {
		if opts.Env == nil {
			opts.Env = map[string]string{}
		}
		if _, ok := opts.Env["TERM"]; !ok {
			opts.Env["TERM"] = t
		}
	}
	sizeOf := func() (int, int, bool) {
		for _, f := range []*os.File{out, in} {
			if f != nil && term.IsTerminal(int(f.Fd())) {
				if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
					return min(w, api.MaxPtyCols), min(h, api.MaxPtyRows), true
				}
			}
		}
		return 0, 0, false
	}
	opts.Cols, opts.Rows, _ = sizeOf()
	p, err := c.OpenPTY(ctx, id, opts)
	if err != nil {
		return failRun(ctx, s, err)
	}
	defer p.Close()
	if interactive {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			_ = p.Kill(context.WithoutCancel(ctx))
			report(s.stderr, fmt.Errorf("putting the terminal in raw mode: %w", err))
			return exitPlatform
		}
		defer term.Restore(int(in.Fd()), old)
		go func() {
			// Keystrokes as they come; a read error (stdin closed) ends
			// the input, never the command.
			buf := make([]byte, 4096)
			for {
				n, err := in.Read(buf)
				if n > 0 {
					if _, werr := p.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	stopWinch := followWindowSize(func() {
		if w, h, ok := sizeOf(); ok {
			_ = p.Resize(ctx, w, h)
		}
	})
	defer stopWinch()
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(s.stdout, p)
		copied <- err
	}()
	select {
	case err = <-copied:
	case <-ctx.Done():
		// Interrupted here (-t without raw mode, SIGTERM, SIGHUP): the
		// command ends too, as an exec's does.
		_ = p.Kill(context.WithoutCancel(ctx))
		return failRun(ctx, s, ctx.Err())
	}
	code, werr := p.Wait(context.WithoutCancel(ctx))
	if err == nil {
		err = werr
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return failRun(ctx, s, err)
	}
	if code < 0 || code > 255 {
		return exitFailure
	}
	return code
}
