package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/internal/node"
	"github.com/withruntime/withruntime/internal/server"
	"github.com/withruntime/withruntime/internal/storagequota"
)

// runNode is `withruntime node`: a node daemon of a many-host
// installation, serving the node RPC to its API servers.
func runNode(fs *pflag.FlagSet) func(args []string) int { return nodeWith(fs, startNodeAndWait) }

// nodeWith is runNode with what runs the node given (tests).
func nodeWith(fs *pflag.FlagSet, run func(context.Context, server.NodeConfig) error) func(args []string) int {
	var cfg server.NodeConfig
	fs.StringVar(&cfg.Store, "store", "", "the installation's database `URL` (postgres://...), shared with its API servers (required)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "the `DIR` for the node's id and per-sandbox state (required)")
	fs.StringVar(&cfg.Listen, "listen", server.DefaultNodeListen, "the `ADDRESS` to serve the node RPC on (mutual TLS: API servers of the installation only)")
	fs.StringVar(&cfg.Advertise, "advertise", "", "the `ADDRESS` API servers reach this node at (default --listen, which then must name a host)")
	// The settings node shares with serve: cache-dir, the manager's
	// limits, the isolation, egress and the pools.
	cfg.RegisterFlags(fs)
	fs.StringVar(&cfg.SharedCheckpoints, "shared-checkpoints", "", "a `DIR` every node mounts (e.g. NFS) for paused sandboxes' checkpoints, so that any node with the same runsc and CPU may resume them")
	storageGiB := fs.Int64("storage-quota-gib", storagequota.DefaultGiB, "`GIB` an account's snapshots and volumes may take in all, counted over every node's (403 forbidden past it; 0: no bound); give every node the same")
	fs.DurationVar(&cfg.LeaseTTL, "node-lease", node.DefaultLeaseTTL, "the node's lease in the store: renewed every fifth of it; the node stops serving sandboxes after half of it without a renewal, and is declared lost after all of it")
	return func(args []string) int {
		if len(args) > 0 {
			fmt.Fprintf(os.Stderr, "node: unexpected argument %q\nusage: withruntime node [flags] (\"withruntime node --help\" lists the flags)\n", args[0])
			return 2
		}
		cfg.StorageQuotaBytes = *storageGiB << 30
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := run(ctx, cfg); err != nil {
			fmt.Fprintf(os.Stderr, "error: internal: %v\n", err)
			return 1
		}
		return 0
	}
}

// startNodeAndWait runs the node until ctx ends or it fails.
func startNodeAndWait(ctx context.Context, cfg server.NodeConfig) error {
	n, err := server.StartNode(ctx, cfg)
	if err != nil {
		return err
	}
	return n.Wait(ctx)
}
