package server

import (
	"github.com/withruntime/withruntime/internal/defaults"
	"github.com/withruntime/withruntime/internal/manager"
)

// DefaultPoolSize is how many warm sandboxes of the default size serve
// (and with it the local daemon) keeps ready when no --pool is given.
// Its justification is the measured cost of an idle pool member: about
// 22 MiB of host memory (PSS of its host processes, `go run ./bench`) and
// no measurable CPU while it waits, at the lowest CPU priority, so two
// buy the common case (one create after another, or a pair) a warm
// start while leaving admission room for the sandboxes themselves on a
// small host. In-process servers (server.Start with a zero
// Manager.Pools) keep no pool unless they ask for one.
const DefaultPoolSize = 2

// DefaultPools are serve's pools when no --pool is given: one of the
// manager's default size (package defaults: what a create that names no
// size gets).
func DefaultPools() []manager.Pool {
	return []manager.Pool{{VCPUs: defaults.VCPUs, MemoryMiB: defaults.MemoryMiB, Size: DefaultPoolSize}}
}
