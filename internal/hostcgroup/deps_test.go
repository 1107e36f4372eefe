package hostcgroup

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: every backend imports it, so it imports
// nothing of this module.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages())
}
