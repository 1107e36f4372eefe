//go:build unix

package cli

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// lockHeld says whether another process holds f's flock (the daemon holds
// daemon.pid's while it runs): a shared lock cannot be had.
func lockHeld(f *os.File) bool {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return true
}

// lockExclusive waits for an exclusive flock on f, held until f is closed.
func lockExclusive(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
}

// detach makes cmd start in its own session: no terminal, and not in the
// command's process group, so Ctrl-C on the command leaves it be.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// terminate sends pid SIGTERM; a process already gone is no error.
func terminate(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
