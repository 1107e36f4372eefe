//go:build !linux || withruntime_hostless

package main

import (
	"os"

	"github.com/withruntime/withruntime/internal/cli"
)

// hostHooks are the host's commands where sandboxes cannot run: they only
// say so. (The tag withruntime_hostless builds this on Linux, for a test.)
func hostHooks() cli.Hooks { return hostlessHooks(os.Stderr) }
