package manager

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module the wire contract, the domain, the store, the images, billing
// and the egress types; never the HTTP layer or a backend.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("api", "internal/sandbox", "internal/store", "internal/image", "internal/billing", "internal/egress"))
}
