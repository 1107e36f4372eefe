package membudget

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the standard library only, so that the
// API, the E2B layer and the MCP tools can share it.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd())
}
