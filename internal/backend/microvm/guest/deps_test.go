package guest

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the guest's init links it, so it
// imports nothing of this module.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages())
}
