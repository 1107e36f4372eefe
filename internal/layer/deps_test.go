package layer

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it stores and mounts layers and knows
// nothing of who uses them.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("golang.org/x/sys/unix", "internal/tarx", "internal/template"))
}
