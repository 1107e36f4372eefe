package api

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the wire contract is imported by the agent and the client and imports only the standard library and internal/envname (the rule for environment names it shares with the domain).
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("internal/envname"))
}
