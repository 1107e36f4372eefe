package localtrusttest

import (
	"os/exec"
	"syscall"
	"testing"
)

// asUser makes cmd run as uid (and gid uid), killed with its parent.
func asUser(_ testing.TB, cmd *exec.Cmd, uid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)},
		Pdeathsig:  syscall.SIGKILL,
	}
}
