package httpapi

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package. Of this module it may import only: the wire contract, the domain, the store and
// billing (usage in USD); the public client with the MCP tools built on it, which /v1/mcp runs against this server
// in-process (selfcall); the memory budget of agents' answers; the build's version, which /v1/health reports;
// connection admission (internal/admission), which bounds what clients hold of the server, knows nothing of routes
// or keys, and serves the API and the E2B layer under one set of bounds; and the rules of accounts, keys and trials
// (internal/accounts), which the handlers ask and which know nothing of HTTP; the service seam it calls the sandboxes
// through (internal/service), and the egress log's events it shows. Never the manager, a backend or the CLI.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("api", "internal/sandbox", "internal/store", "internal/billing", "client", "internal/mcptools", "internal/selfcall", "internal/membudget", "internal/buildinfo", "internal/admission", "internal/accounts", "internal/service", "internal/egress", "internal/template"))
}
