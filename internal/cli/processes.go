package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// processVerbs are the verbs of "withruntime sandbox" that reach the
// background processes "sandbox exec -d" starts, named as docker's.
func (a *App) processVerbs() []leaf {
	return []leaf{
		{use: "ps [-a] [--json] ID", short: "list the background processes of a sandbox (-a: also the ended ones)", about: psAbout, define: a.sandboxPs},
		{use: "logs [-f] ID PID", short: "print the output of a background process (-f: follow it)", about: logsAbout, define: a.sandboxLogs},
		{use: "kill [--json] ID PID...", short: "kill background processes with their children", about: killAbout, define: a.sandboxKill},
	}
}

const psAbout = `Lists the background processes of a sandbox (started by "sandbox exec -d"),
oldest first: by default those still running, as docker ps does; with -a
(--all) also those that ended, with their exit codes. --json prints the API's
process list without the output: "sandbox logs ID PID" prints that.`

const logsAbout = `Prints the output of background process PID of sandbox ID: what it wrote
to stdout on stdout, to stderr on stderr. The last 1 MiB of each stream is
kept. With -f (--follow), prints that and then the output as it comes, until
the process ends (exit 0) or Ctrl-C; the process is not touched either way.`

const killAbout = `Kills background processes of sandbox ID with SIGKILL, the processes they
started included, and prints each PID killed. Killing one that already ended
is no error.`

// detachAbout is the part of exec's help about -d.
const detachAbout = `With -d (--detach), starts CMD in the background, prints its PID and exits 0:
"sandbox ps ID" lists it, "sandbox logs -f ID PID" follows its output and
"sandbox kill ID PID" ends it; it lives until it exits, is killed, or the
lease ends.`

func (a *App) sandboxPs(cmd *command, s streams) runFunc {
	all := cmd.fs.BoolP("all", "a", false, "also the processes that ended")
	return runListing(a, s, listing[api.Process]{
		cmd: cmd, ids: 1, trial: trialFlag(cmd.fs),
		fetch: func(ctx context.Context, c *client.Client, ids []string) ([]api.Process, error) {
			return c.ListProcessesWith(ctx, ids[0], client.ListProcessesOptions{NoOutput: true, Running: !*all})
		},
		asJSON: func(l []api.Process) any { return api.ProcessList{Processes: l} },
		header: "PID\tSTATUS\tSTARTED\tCOMMAND",
		row: func(p api.Process) string {
			return fmt.Sprintf("%d\t%s\t%s\t%s", p.Pid, processStatus(p), timeString(&p.StartedAt), commandString(p.Cmd))
		},
	})
}

// processStatus is a process's STATUS column: running, exited N (128+N
// for death by signal N, as a shell says), or timed out.
func processStatus(p api.Process) string {
	switch {
	case p.Running:
		return "running"
	case p.TimedOut:
		return "timed out"
	case p.ExitCode != nil:
		return "exited " + strconv.Itoa(*p.ExitCode)
	}
	return "ended"
}

// plainWordRe matches an argument a shell reads as it is.
var plainWordRe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// commandString is a command as a shell line that runs it.
func commandString(c api.Command) string {
	if c.Argv == nil {
		return c.Shell
	}
	words := make([]string, len(c.Argv))
	for i, w := range c.Argv {
		if plainWordRe.MatchString(w) {
			words[i] = w
		} else {
			words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

// parsePid reads a PID argument.
func parsePid(cmd *command, s streams, arg string) (int, int, bool) {
	pid, err := strconv.Atoi(arg)
	if err != nil || pid < 1 {
		return 0, cmd.usageError(s, "PID must be a positive integer, not %q", arg), false
	}
	return pid, 0, true
}

func (a *App) sandboxLogs(cmd *command, s streams) runFunc {
	follow := cmd.fs.BoolP("follow", "f", false, "then print the output as it comes, until the process ends")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 2 {
			return cmd.usageError(s, "want a sandbox ID and a PID, got %d arguments", len(pos))
		}
		pid, code, ok := parsePid(cmd, s, pos[1])
		if !ok {
			return code
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		if *follow {
			_, err = c.FollowProcess(ctx, pos[0], pid, client.FollowOptions{}, client.ExecOptions{Stdout: s.stdout, Stderr: s.stderr})
			return endLogs(ctx, s, err)
		}
		p, err := c.GetProcess(ctx, pos[0], pid)
		if err != nil {
			return endLogs(ctx, s, err)
		}
		if p.StdoutTruncated || p.StderrTruncated {
			// Said first, on stderr: the output that follows starts in the
			// middle.
			fmt.Fprintf(s.stderr, "withruntime: older output of process %d was dropped: the last %d MiB of each stream is kept\n", pid, api.OutputCap>>20)
		}
		if _, err := io.WriteString(s.stdout, p.Stdout); err != nil {
			return endLogs(ctx, s, err)
		}
		if _, err := io.WriteString(s.stderr, p.Stderr); err != nil {
			return endLogs(ctx, s, err)
		}
		return exitOK
	}
}

// endLogs is the exit code of "sandbox logs" after err: Ctrl-C, the way
// to stop following, and a closed stdout (as in "| head") end it quietly
// with the shell's code for the signal; anything else is reported.
func endLogs(ctx context.Context, s streams, err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, syscall.EPIPE):
		return 128 + int(syscall.SIGPIPE)
	case ctx.Err() != nil:
		if code := signalExitCode(ctx); code != 0 {
			return code
		}
		return 128 + int(syscall.SIGINT)
	}
	report(s.stderr, err)
	return exitFailure
}

func (a *App) sandboxKill(cmd *command, s streams) runFunc {
	asJSON := cmd.fs.Bool("json", false, "print the killed processes as JSON")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) < 2 {
			return cmd.usageError(s, "want a sandbox ID and at least one PID, got %d arguments", len(pos))
		}
		pids := make([]int, 0, len(pos)-1)
		for _, arg := range pos[1:] {
			pid, code, ok := parsePid(cmd, s, arg)
			if !ok {
				return code
			}
			pids = append(pids, pid)
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		status := exitOK
		killed := []api.Process{}
		for _, pid := range pids {
			p, err := c.KillProcess(ctx, pos[0], pid)
			if err != nil {
				report(s.stderr, err)
				status = exitFailure
				continue
			}
			// The output is "sandbox logs"' to show, not this listing's.
			p.SetOutput("", "")
			killed = append(killed, *p)
			if !*asJSON {
				fmt.Fprintln(s.stdout, p.Pid)
			}
		}
		if *asJSON {
			if code := printJSON(s, api.ProcessList{Processes: killed}); code != exitOK {
				return code
			}
		}
		return status
	}
}

// startDetached starts req in the background in sandbox id for
// "sandbox exec -d" and prints its pid, or with asJSON the process.
func startDetached(ctx context.Context, s streams, c *client.Client, id string, req api.ExecRequest, asJSON bool) int {
	p, err := c.StartProcess(ctx, id, req)
	if err != nil {
		return failRun(ctx, s, err)
	}
	if asJSON {
		if code := printJSON(s, p); code != exitOK {
			return exitPlatform
		}
		return exitOK
	}
	fmt.Fprintln(s.stdout, p.Pid)
	return exitOK
}
