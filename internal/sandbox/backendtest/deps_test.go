package backendtest

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the suite knows the domain, the agent's
// wire types (api, for AgentShell) and the network plumbing's listener
// (network, for Egress) besides the standard library, never a backend, so
// that every backend's tests can run it.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("internal/sandbox", "api", "internal/network"))
}
