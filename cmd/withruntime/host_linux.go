//go:build !withruntime_hostless

package main

import (
	"os"

	"github.com/withruntime/withruntime/internal/cli"
)

// hostHooks are serve, setup, node and the local daemon, which is this
// binary's serve.
func hostHooks() cli.Hooks {
	return cli.Hooks{Serve: serve, Setup: runSetup, Node: runNode, Daemon: daemonExecutable}
}

// daemonExecutable is the binary the CLI runs as "serve" for the local
// daemon: this one.
func daemonExecutable() (string, error) { return os.Executable() }
