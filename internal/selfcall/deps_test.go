package selfcall

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the standard library only.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd())
}
