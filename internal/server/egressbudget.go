package server

import (
	"log/slog"

	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/egress"
)

// otherReserve is what the host's bound on proxied connections leaves,
// besides the clients' connections (the API's and E2B's), for every other descriptor the server
// holds: the agents' channels, the store, logs, the backend's pipes.
const otherReserve = 4096

// hostEgressConns is how many proxied connections all sandboxes together
// may hold, from the open files limit nofile, the connection limit of a
// listener of clients maxConns (0: the default) and how many such
// listeners there are (the API's, E2B's): half of what is left once
// those listeners (together at most half the limit, see listenLimit) and
// the rest (otherReserve, at most a quarter) are reserved, since a
// connection holds two descriptors. Past it, connections are refused and
// logged, where the accepts at EMFILE would otherwise fail for every
// sandbox, API client and agent alike.
func hostEgressConns(nofile uint64, maxConns, listeners int) int {
	if maxConns <= 0 {
		maxConns = admission.DefaultMaxConns
	}
	clients := min(uint64(maxConns)*uint64(max(listeners, 1)), nofile/2)
	rest := min(uint64(otherReserve), nofile/4)
	if nofile <= clients+rest+2 {
		return 1
	}
	return int((nofile - clients - rest) / 2)
}

// egressBudget is the bound on proxied connections of the whole host,
// from the open files limit as it is now; it is logged with the other
// bounds. 0 (none) when the limit cannot be read.
func egressBudget(cfg Config, log *slog.Logger) int {
	nofile, err := fileLimit()
	if err != nil {
		log.Warn("egress: no host-wide connection limit: the open files limit is unknown", "err", err)
		return 0
	}
	host := hostEgressConns(nofile, cfg.MaxConns, cfg.listeners())
	perSandbox := cfg.EgressMaxConns
	if perSandbox <= 0 {
		perSandbox = egress.DefaultMaxConns
	}
	perAccount := cfg.EgressMaxConnsAccount
	if perAccount <= 0 {
		perAccount = egress.DefaultAccountConnsFactor * perSandbox
	}
	perAccount = min(perAccount, max(host*3/4, 1)) // as egress.Config keeps it
	log.Info("egress connection limits", "per_sandbox", perSandbox, "per_account", perAccount, "host", host, "nofile", nofile)
	return host
}
