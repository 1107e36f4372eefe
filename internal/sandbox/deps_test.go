package sandbox

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: everything depends on the domain, so it imports nothing of this module.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages())
}
