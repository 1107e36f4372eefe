package agent

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it ships into every sandbox and may import only the standard library, x/sys/unix, the wire contract and the tar extractor (itself standard library only).
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("api", "golang.org/x/sys/unix", "internal/tarx"))
}
