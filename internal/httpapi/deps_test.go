package httpapi

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module it may import only the wire contract, the domain and the store,
// and the public client with the MCP tools built on it, which /v1/mcp runs against this server in-process (selfcall);
// the memory budget of agents' answers; the build's version, which /v1/health reports; and connection admission
// (internal/admission), which bounds what clients hold of the server and knows nothing of routes or keys, so that
// the API and the E2B layer are served under one set of bounds; and the rules of accounts, keys and trials
// (internal/accounts), which the handlers call and which know nothing of HTTP.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("api", "internal/sandbox", "internal/store", "internal/billing", "client", "internal/mcptools", "internal/selfcall", "internal/membudget", "internal/buildinfo", "internal/admission", "internal/accounts"))
}
