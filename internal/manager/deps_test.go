package manager

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it knows the domain and the store, never the HTTP layer or a backend.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("api", "internal/sandbox", "internal/store", "internal/image", "internal/billing", "internal/egress"))
}
