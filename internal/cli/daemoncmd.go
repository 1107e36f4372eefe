package cli

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/withruntime/withruntime/client"
)

// daemonStopWait bounds how long "daemon stop" waits for the daemon to
// exit after SIGTERM (the server gives requests 5 s to finish).
const daemonStopWait = 30 * time.Second

// daemonCmd runs "withruntime daemon status|stop".
func (a *App) daemonCmd(s streams, args []string) int {
	return verbs("daemon", s, args, map[string]func([]string) int{
		"status": func(args []string) int { return a.daemonStatus(s, args) },
		"stop":   func(args []string) int { return a.daemonStop(s, args) },
	})
}

func (a *App) daemonStatus(s streams, args []string) int {
	if len(args) != 0 {
		fmt.Fprintf(s.stderr, "usage: withruntime daemon status\n")
		return exitUsage
	}
	d, err := a.localDaemon()
	if err != nil {
		report(s.stderr, &cliError{codeUnavailable, err.Error()})
		return exitFailure
	}
	if pid, ok := d.running(); ok {
		fmt.Fprintf(s.stdout, "running\npid: %d\naddress: %s\ndata dir: %s\nlog: %s\n", pid, d.url, d.dir, d.log)
	} else {
		fmt.Fprintf(s.stdout, "not running\naddress: %s\ndata dir: %s\nlog: %s\n", d.url, d.dir, d.log)
		if c, err := client.New(client.WithBaseURL(d.url), client.WithAPIKey("")); err == nil && d.answers(context.Background(), c) {
			fmt.Fprintf(s.stdout, "note: another server answers on %s (not this data dir's daemon)\n", d.url)
		}
	}
	return exitOK
}

// daemonStop sends the daemon SIGTERM and waits for it to exit. Sandboxes
// keep running (the next daemon reattaches them), but no lease is
// enforced until one starts. No daemon running is success.
func (a *App) daemonStop(s streams, args []string) int {
	if len(args) != 0 {
		fmt.Fprintf(s.stderr, "usage: withruntime daemon stop\n")
		return exitUsage
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
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && err != syscall.ESRCH {
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
