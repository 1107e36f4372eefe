package secrets

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the wire contract, the domain, the store and the egress types only.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("api", "internal/sandbox", "internal/store", "internal/egress"))
}
