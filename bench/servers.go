package main

import (
	"context"
	"log/slog"
	"net/netip"
	"os"

	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/server"
)

// benchServer is one server the bench starts in its own process: what
// `serve --overcommit X --pool ...` runs, its JSON log tapped.
type benchServer struct {
	srv  *server.Server
	c    *client.Client
	tap  *logTap
	dir  string
	done func()
}

// startServer starts a server with the given pools (none: `--pool none`).
// opts change the configuration further (the microVM comparison's
// isolation; the templates mode's data dir, which then outlives the
// server). up nil: no egress upstream.
func startServer(ctx context.Context, cache string, overcommit float64, pools []manager.Pool, up *upstream, opts ...func(*server.Config)) (*benchServer, error) {
	dir, err := os.MkdirTemp("", "withruntime-bench-")
	if err != nil {
		return nil, err
	}
	tap := newLogTap()
	cfg := server.Config{
		Listen: "127.0.0.1:0", DataDir: dir, CacheDir: cache, Quiet: true,
		Logger: slog.New(slog.NewJSONHandler(tap, &slog.HandlerOptions{Level: slog.LevelInfo})),
		// Bursts of default-size sandboxes exceed a 2-core host's real
		// size; the benchmark measures start-up, not admission.
		Manager: manager.Config{Overcommit: overcommit, Pools: pools},
	}
	if up != nil {
		// What `serve --egress-hosts` does: the resolver knows the
		// upstream's name.
		cfg.EgressHosts = up.hostsFile
		// The upstream's prefix is on the blocklist; serve
		// --egress-permit opens it.
		cfg.EgressPermit = []netip.Prefix{upstreamNet}
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c, err := client.New(client.WithBaseURL(srv.URL), client.WithAPIKey(srv.AdminKey))
	if err != nil {
		srv.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &benchServer{srv: srv, c: c, tap: tap, dir: dir, done: func() {
		srv.Close()
		os.RemoveAll(dir)
	}}, nil
}
