package httpapi

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module it may import only the wire contract, the domain and the store.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("api", "internal/sandbox", "internal/store", "internal/billing"))
}
