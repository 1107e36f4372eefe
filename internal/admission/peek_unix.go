//go:build unix

package admission

import (
	"net"
	"syscall"
)

// peek copies what the kernel holds unread of nc into buf, without
// taking it or waiting; 0 when there is nothing or nc is no socket.
func peek(nc net.Conn, buf []byte) int {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return n
}
