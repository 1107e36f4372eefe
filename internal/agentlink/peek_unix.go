//go:build unix

package agentlink

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// peekQuiet looks at a socket without reading or blocking: quiet means
// nothing to read and not closed.
func peekQuiet(rc syscall.RawConn) bool {
	quiet := false
	rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		quiet = n <= 0 && (err == unix.EAGAIN || err == unix.EWOULDBLOCK)
		return true
	})
	return quiet
}
