package microvm

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package as every backend is fenced: never the
// manager or the API.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/sandbox", "internal/network", "internal/image", "internal/agentlink", "internal/hostcgroup", "internal/backend/microvm/guest", "internal/lines", "internal/undo", "internal/layer"))
}
