package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/withruntime/withruntime/client"
)

// daemonStopWait bounds how long "daemon stop" waits for the daemon to
// exit after SIGTERM (the server gives requests 5 s to finish).
const daemonStopWait = 30 * time.Second

// daemonVerbs are the verbs of "withruntime daemon".
func (a *App) daemonVerbs() []leaf {
	return []leaf{
		{use: "start", short: "start the local daemon unless it runs, and wait until it answers", quiet: true,
			about: daemonStartAbout, define: a.daemonStart},
		{use: "status", short: "whether the local daemon runs (pid, address, data dir, log)", quiet: true,
			about: daemonStatusAbout, define: a.daemonStatus},
		{use: "stop", short: "stop the local daemon", quiet: true,
			define: a.daemonStop},
	}
}

const daemonStatusAbout = `Shows whether the local daemon runs: its pid, address, data dir and log.
When it does not run and something listens on its address, a note says
what. A process of another user than the daemon's (the owner of its
admin.key) is named with its user: "note: ADDR is held by process PID
(COMM) of user NAME (uid N), not by the local daemon of user ...".
Commands (without WITHRUNTIME_API_KEY) then fail with forbidden, sending
it nothing and starting no daemon over it; stop that process and run them
again. A server that answers there but is not this data dir's daemon is
"note: another server answers on URL (not this data dir's daemon)".`

const daemonStartAbout = `Starts the local daemon in the background on the default address, as any
command that needs a server does when nothing answers there, and waits
until it answers. It does nothing when something of this user answers on
the address already, and exits 0 then too. Another user's process on the
address is refused with forbidden (nothing is started over it).
The SDKs run it when they find nothing on the default address.`

// daemonStart starts the local daemon as dial does, without a request
// after it: the SDKs run it so that a program with nothing configured
// works after the daemon exited when idle.
func (a *App) daemonStart(cmd *command, s streams) runFunc {
	return func(ctx context.Context, args []string) int {
		if len(args) != 0 {
			return cmd.usageError(s, "unexpected argument %q", args[0])
		}
		d, err := a.localDaemon()
		if err != nil {
			report(s.stderr, &cliError{codeUnavailable, err.Error()})
			return exitFailure
		}
		_, owner := d.adminKey()
		if _, err := d.checkHolder(owner); err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		probe, err := client.New(client.WithBaseURL(d.url), client.WithAPIKey(""), a.userAgent())
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if d.answers(ctx, probe) {
			if pid, ok := d.running(); ok {
				fmt.Fprintf(s.stderr, "withruntime: the local daemon runs (pid %d) on %s\n", pid, d.addr)
			} else {
				fmt.Fprintf(s.stderr, "withruntime: another server of this user answers on %s (not this data dir's daemon)\n", d.url)
			}
			return exitOK
		}
		if err := a.startDaemon(ctx, d, probe); err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		return exitOK
	}
}

// daemonStatusJSON is "daemon status --json".
type daemonStatusJSON struct {
	Running bool   `json:"running"`
	PID     int    `json:"pid,omitempty"`
	Address string `json:"address"`
	DataDir string `json:"data_dir"`
	Log     string `json:"log"`
	// Holder says who holds the address when the daemon does not run.
	Holder string `json:"holder,omitempty"`
}

func (a *App) daemonStatus(cmd *command, s streams) runFunc {
	asJSON := cmd.fs.Bool("json", false, "print the status as JSON: running, pid, address, data_dir, log and, when not running, holder")
	return func(_ context.Context, args []string) int {
		if len(args) != 0 {
			return cmd.usageError(s, "unexpected argument %q", args[0])
		}
		d, err := a.localDaemon()
		if err != nil {
			report(s.stderr, &cliError{codeUnavailable, err.Error()})
			return exitFailure
		}
		if *asJSON {
			st := daemonStatusJSON{Address: d.url, DataDir: d.dir, Log: d.log}
			if pid, ok := d.running(); ok {
				st.Running, st.PID = true, pid
			} else {
				_, owner := d.adminKey()
				var ae *client.APIError
				if _, err := d.checkHolder(owner); errors.As(err, &ae) {
					st.Holder = ae.Message
				} else if c, err := client.New(client.WithBaseURL(d.url), client.WithAPIKey("")); err == nil && d.answers(context.Background(), c) {
					st.Holder = fmt.Sprintf("another server answers on %s (not this data dir's daemon)", d.url)
				}
			}
			return printJSON(s, st)
		}
		if pid, ok := d.running(); ok {
			fmt.Fprintf(s.stdout, "running\npid: %d\naddress: %s\ndata dir: %s\nlog: %s\n", pid, d.url, d.dir, d.log)
		} else {
			fmt.Fprintf(s.stdout, "not running\naddress: %s\ndata dir: %s\nlog: %s\n", d.url, d.dir, d.log)
			_, owner := d.adminKey()
			var ae *client.APIError
			if _, err := d.checkHolder(owner); errors.As(err, &ae) {
				fmt.Fprintf(s.stdout, "note: %s\n", ae.Message)
			} else if c, err := client.New(client.WithBaseURL(d.url), client.WithAPIKey("")); err == nil && d.answers(context.Background(), c) {
				fmt.Fprintf(s.stdout, "note: another server answers on %s (not this data dir's daemon)\n", d.url)
			}
		}
		return exitOK
	}
}

// daemonStop sends the daemon SIGTERM and waits for it to exit. Sandboxes
// keep running (the next daemon reattaches them), but no lease is
// enforced until one starts. No daemon running is success.
func (a *App) daemonStop(cmd *command, s streams) runFunc {
	return func(_ context.Context, args []string) int {
		if len(args) != 0 {
			return cmd.usageError(s, "unexpected argument %q", args[0])
		}
		d, err := a.localDaemon()
		if err != nil {
			report(s.stderr, &cliError{codeUnavailable, err.Error()})
			return exitFailure
		}
		pid, ok := d.running()
		if !ok {
			fmt.Fprintln(s.stderr, "withruntime: the local daemon is not running")
			return exitOK
		}
		if err := terminate(pid); err != nil {
			report(s.stderr, &cliError{"internal", fmt.Sprintf("stopping the local daemon (pid %d): %v", pid, err)})
			return exitFailure
		}
		deadline := time.Now().Add(daemonStopWait)
		for {
			if _, ok := d.running(); !ok {
				fmt.Fprintf(s.stderr, "withruntime: stopped the local daemon (pid %d)\n", pid)
				return exitOK
			}
			if time.Now().After(deadline) {
				report(s.stderr, &cliError{"internal", fmt.Sprintf(
					"the local daemon (pid %d) is still running %v after SIGTERM; see %s", pid, daemonStopWait, d.log)})
				return exitFailure
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
