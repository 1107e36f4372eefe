package mcptools

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it acts through the public client only,
// so that the CLI links nothing of the server's for it.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("api", "client"))
}
