package api

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the wire contract is imported by the agent and the client and imports only the standard library.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd())
}
