package network

import "golang.org/x/sys/unix"

func setMark(fd int) error {
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, ServiceMark)
}
