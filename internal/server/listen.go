package server

import (
	"fmt"
	"net"
	"syscall"

	"github.com/withruntime/withruntime/internal/admission"
)

// listenAPI listens on cfg.Listen with the API's connection limits.
func listenAPI(cfg Config) (*admission.Listener, error) {
	limit, err := listenLimit(cfg)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	return admission.Listen(l, admission.ConnLimits{MaxConns: limit, Logger: cfg.Logger}), nil
}

// listeners is how many listeners take clients' connections: the API's,
// and E2B's and the previews' when they are served.
func (c Config) listeners() int {
	n := 1
	if c.E2BListen != "" {
		n++
	}
	if c.PreviewListen != "" {
		n++
	}
	return n
}

// listenLimit is the connection limit of each of cfg's listeners. All of
// them together never take more than half the descriptors the process
// may open, so that what sandboxes use of the server (egress relays,
// agent channels) always has the rest, however many clients come.
func listenLimit(cfg Config) (int, error) {
	if cfg.MaxConns < 0 {
		return 0, fmt.Errorf("--max-conns must not be negative")
	}
	var nofile uint64
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		nofile = rl.Cur
	}
	want := cfg.MaxConns
	if want == 0 {
		want = admission.DefaultMaxConns
	}
	limit := listenerConns(want, cfg.listeners(), nofile)
	if limit < want {
		cfg.Logger.Warn("fewer connections per listener than configured: the descriptor limit is low",
			"max_conns", want, "listeners", cfg.listeners(), "nofile", nofile, "allowed", limit)
	}
	return limit, nil
}

// listenerConns is the connection limit of each of n listeners: maxConns
// (0: the default), or less, so that together they hold at most half of
// nofile (0: unknown, no bound), and at least one each.
func listenerConns(maxConns, n int, nofile uint64) int {
	limit := maxConns
	if limit <= 0 {
		limit = admission.DefaultMaxConns
	}
	if nofile > 0 && uint64(limit)*uint64(n) > nofile/2 {
		limit = int(max(nofile/2/uint64(n), 1))
	}
	return limit
}
