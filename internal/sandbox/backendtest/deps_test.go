package backendtest

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the suite knows the domain and the
// standard library only, never a backend, so that every backend's tests
// can run it.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("internal/sandbox"))
}
