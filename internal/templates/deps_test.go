package templates

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the domain, the store's kinds, the
// layer store, the image reader, the archive kinds, the build spec and
// the sandboxes' seam (service, for a build's creates); never the API's
// wire types, the HTTP layer, the manager or a backend.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/sandbox", "internal/template", "internal/store", "internal/layer", "internal/ociimage", "internal/tarx", "internal/service", "internal/template/build"))
}
