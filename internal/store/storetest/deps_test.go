package storetest

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module it may import only the
// store it opens.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/store"))
}
