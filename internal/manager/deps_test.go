package manager

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module the domain and the service seam, the store, the images, billing,
// the egress types and the shared defaults; never the API's wire types (api), the HTTP layer or a backend. The API's request is
// converted at the edge (internal/httpapi), so a create option reaches the manager as a field of
// service.CreateRequest.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/sandbox", "internal/service", "internal/store", "internal/image", "internal/template", "internal/billing", "internal/egress", "internal/defaults", "internal/storagequota"))
}
