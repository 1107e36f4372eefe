package service

import (
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the standard library, the domain and the
// egress log's event type only; never the API's wire types (api), a front
// door (internal/httpapi, internal/node) or what implements the seam.
// Of the HTTP packages it takes net/http alone, for the agent seam's
// round tripper and the statuses: no server helpers (httputil, httptest).
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("internal/sandbox", "internal/egress"))
	testenv.CheckImports(t, func(path string) bool { return !strings.HasPrefix(path, "net/http/") })
}
