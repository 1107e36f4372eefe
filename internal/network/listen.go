package network

import (
	"context"
	"net"
	"syscall"
)

// ServiceMark is the socket mark of the proxy's and the resolver's
// listeners. The table's host_in chain drops what reaches those ports
// from anywhere but a sandbox only when the socket it would reach has
// this mark: a table a dead server left behind then never closes a port
// that another program listens on later.
const ServiceMark = 0x77720002

// markControl sets ServiceMark on a socket before it binds.
func markControl(_, _ string, c syscall.RawConn) error {
	var err error
	if cerr := c.Control(func(fd uintptr) { err = setMark(int(fd)) }); cerr != nil {
		return cerr
	}
	return err
}

// ListenTCP listens on addr with ServiceMark set.
func ListenTCP(addr *net.TCPAddr) (*net.TCPListener, error) {
	lc := net.ListenConfig{Control: markControl}
	l, err := lc.Listen(context.Background(), "tcp4", addr.String())
	if err != nil {
		return nil, err
	}
	return l.(*net.TCPListener), nil
}

// ListenUDP listens on addr with ServiceMark set.
func ListenUDP(addr *net.UDPAddr) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: markControl}
	c, err := lc.ListenPacket(context.Background(), "udp4", addr.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}
