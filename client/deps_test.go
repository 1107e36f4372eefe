package client

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the public client depends on the standard library and the wire contract only.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("api"))
}
