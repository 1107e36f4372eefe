//go:build !unix

package cli

import (
	"errors"
	"os"
	"os/exec"
)

// Without flock and sessions (Windows) no local daemon runs: the CLI is
// built without one there (Hooks.Daemon is nil), so these only keep
// "daemon status|stop" compiling, and they find nothing.

func lockHeld(*os.File) bool { return false }

func lockExclusive(*os.File) error { return errors.ErrUnsupported }

func detach(*exec.Cmd) {}

func terminate(int) error { return errors.ErrUnsupported }
