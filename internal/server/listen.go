package server

import (
	"fmt"
	"net"
	"syscall"

	"github.com/withruntime/withruntime/internal/httpapi"
)

// listenAPI listens on cfg.Listen with the API's connection limits. The
// API never takes more than half the descriptors the process may open, so
// that what sandboxes use of the server (egress relays, agent channels)
// always has the rest, however many clients come.
func listenAPI(cfg Config) (*httpapi.Listener, error) {
	limit := cfg.MaxConns
	switch {
	case limit < 0:
		return nil, fmt.Errorf("--max-conns must not be negative")
	case limit == 0:
		limit = httpapi.DefaultMaxConns
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur/2 < uint64(limit) {
		cfg.Logger.Warn("fewer API connections than configured: the descriptor limit is low",
			"max_conns", limit, "nofile", rl.Cur, "allowed", rl.Cur/2)
		limit = int(max(rl.Cur/2, 1))
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	return httpapi.Listen(l, httpapi.ConnLimits{MaxConns: limit, Logger: cfg.Logger}), nil
}
