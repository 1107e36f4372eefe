package store

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module it may import only the domain.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/sandbox"))
}
