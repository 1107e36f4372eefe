package agent

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// RunInit is the sandbox's PID 1. It starts argv (argv[0] is a path: the
// agent's own binary with a "serve" argument) as its child, passes SIGTERM
// and SIGINT on to it, reaps every process that ends up orphaned under it,
// and when the child exits, exits with the child's status (128+n for a
// death by signal n). It returns only when the child cannot be started.
//
// It also makes itself a child subreaper, so it does the same job when it
// is not PID 1. The serving process is left alone to use os/exec normally:
// only init calls wait4(-1).
func RunInit(argv []string) error {
	if len(argv) == 0 {
		return errors.New("init: no command to run")
	}
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	// Notify before the child exists, so that no SIGCHLD is missed.
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT)
	child, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
	})
	if err != nil {
		signal.Stop(sigs)
		return fmt.Errorf("starting %s: %w", argv[0], err)
	}
	for sig := range sigs {
		if sig != unix.SIGCHLD {
			_ = unix.Kill(child, sig.(syscall.Signal))
			continue
		}
		if code, exited := reap(child); exited {
			os.Exit(code)
		}
	}
	return nil
}

// reap collects every ended child; signals coalesce, so one SIGCHLD may
// stand for many. It reports whether child was among them, and its status.
func reap(child int) (code int, exited bool) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return code, exited
		}
		if pid == child {
			exited = true
			code = ws.ExitStatus()
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
	}
}
