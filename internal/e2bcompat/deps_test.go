package e2bcompat

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it is a client of withruntime's public
// API (the wire contract, the Go client over an in-process transport) and
// never reaches the manager, the store or an agent directly.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("api", "client", "internal/selfcall", "internal/membudget",
		"internal/e2bcompat/proto/filesystem", "internal/e2bcompat/proto/filesystem/filesystemconnect",
		"internal/e2bcompat/proto/process", "internal/e2bcompat/proto/process/processconnect"))
}
