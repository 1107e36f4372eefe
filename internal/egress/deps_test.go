package egress

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the standard library, the DNS
// message parser, the TLS wire-format reader and the shared backoff only.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("golang.org/x/net/dns/dnsmessage", "golang.org/x/crypto/cryptobyte", "internal/backoff"))
}
