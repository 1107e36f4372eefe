//go:build !linux

package localtrusttest

import (
	"os/exec"
	"testing"
)

// asUser skips: clients check a listener's owner through Linux's socket
// table only (elsewhere they never send the local key), so another user's
// listener is a Linux test.
func asUser(t testing.TB, _ *exec.Cmd, _ int) {
	t.Skip("another user's listener is a Linux test: the owner check reads /proc/net/tcp")
}
