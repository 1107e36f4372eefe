package node

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the RPC's wire types (which carry the
// API's error envelope), the domain, the service seam, the egress log's
// events and the store only; never the API's wire types (api) or the HTTP
// layer (internal/httpapi). The manager comes in through service.Acts,
// so the RPC and the lease loop are tested without a backend.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/noderpc", "internal/sandbox", "internal/service", "internal/egress", "internal/store"))
}
