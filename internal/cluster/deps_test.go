package cluster

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the node RPC's wire and client, the
// cluster's certificates, the domain, the service seam it implements, the
// egress log's events, the store and the shared defaults; never the API's wire types (api),
// the HTTP layer (internal/httpapi), the manager or a backend. A create
// reaches it as the API edge converted it (service.CreateRequest), and a
// node's answer goes back as a record or a kinded error.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/noderpc", "internal/clusterpki", "internal/sandbox", "internal/service", "internal/egress", "internal/store", "internal/defaults"))
}
