//go:build !linux

package server

import (
	"log/slog"
	"net"
)

const dnsReadBuffer = 8 << 20

// growReadBuffer sets c's receive buffer as far as the system allows.
func growReadBuffer(c *net.UDPConn, n int, _ *slog.Logger) { c.SetReadBuffer(n) }
