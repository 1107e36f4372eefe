package node

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the wire contract, the RPC's wire
// types, the API's error envelope, the domain and the store only; the
// manager comes in through interfaces, so the RPC and the lease loop are
// tested without a backend.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("api", "internal/httpapi", "internal/noderpc", "internal/sandbox", "internal/store"))
}
