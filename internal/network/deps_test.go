package network

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it knows paths and names only.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages())
}
