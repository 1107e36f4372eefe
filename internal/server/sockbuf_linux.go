package server

import (
	"log/slog"
	"net"
	"syscall"
)

// dnsReadBuffer is the receive buffer of the resolver's UDP socket, which
// every sandbox's queries share: room for a few seconds of every
// sandbox at the packet rules' bound while the resolver catches up.
const dnsReadBuffer = 8 << 20

// growReadBuffer sets c's receive buffer to n bytes: past the system's
// rmem_max when the server may (SO_RCVBUFFORCE, as root), else as far as
// it allows. It logs what it got.
func growReadBuffer(c *net.UDPConn, n int, log *slog.Logger) {
	raw, err := c.SyscallConn()
	if err == nil {
		var serr error
		err = raw.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, n)
		})
		if err == nil {
			err = serr
		}
	}
	if err != nil {
		c.SetReadBuffer(n)
	}
	got := 0
	if raw != nil {
		raw.Control(func(fd uintptr) {
			got, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		})
	}
	log.Info("egress resolver: UDP receive buffer", "bytes", got)
}
