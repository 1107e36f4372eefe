package egress

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the standard library and the DNS
// message parser only.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("golang.org/x/net/dns/dnsmessage"))
}
