package volume

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the domain, the store, the storage
// quota and the checked extraction; never the manager or the API.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/sandbox", "internal/store", "internal/storagequota", "internal/tarx", "internal/template"))
}
