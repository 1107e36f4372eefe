package agent

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it ships into every sandbox and may import only the standard library, x/sys/unix and the wire contract.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("api", "golang.org/x/sys/unix"))
}
