package egress

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the standard library, the DNS
// message parser, the TLS wire-format reader, x/time/rate (the DNS
// query bucket) and the shared backoff only.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("golang.org/x/net/dns/dnsmessage", "golang.org/x/crypto/cryptobyte", "golang.org/x/time/rate", "internal/backoff"))
}
