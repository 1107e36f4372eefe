package webhooks

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module, the store and the
// domain's records it wraps, and the shared backoff.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/store", "internal/sandbox", "internal/template", "internal/backoff"))
}
