package admission

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module only the wire contract, whose error body the 431 answer is
// written in, and the domain's error kinds, which its refusals carry. No routing, keys or store: the API decides those.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("api", "internal/sandbox"))
}
