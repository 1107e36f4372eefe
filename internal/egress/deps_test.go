package egress

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the standard library, the DNS
// message parser and the TLS wire-format reader only.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("golang.org/x/net/dns/dnsmessage", "golang.org/x/crypto/cryptobyte"))
}
