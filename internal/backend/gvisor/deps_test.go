package gvisor

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: a backend never imports the manager or the API; the host's cgroup layer is shared by every backend, and the layer store's root stacking (internal/layer) by every backend that runs templates.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/sandbox", "internal/network", "internal/image", "internal/agentlink", "internal/hostcgroup", "internal/undo", "internal/layer"))
}
