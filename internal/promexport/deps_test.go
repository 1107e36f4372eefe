package promexport

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module only what it counts
// (the manager's census and observer, the egress events, the store's node
// registry and records).
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/manager", "internal/egress", "internal/store", "internal/sandbox"))
}
