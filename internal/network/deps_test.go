package network

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it knows paths and names only (and
// releases a half-made link through the one undo list).
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/undo"))
}
