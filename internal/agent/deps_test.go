package agent

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it ships into every sandbox and may import only the standard library, x/sys/unix, creack/pty (terminals), the wire contract, the tar extractor and the capped-line reader (both standard library only), and a microVM guest's network setup (standard library and x/sys/unix).
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("api", "golang.org/x/sys/unix", "github.com/creack/pty", "internal/tarx", "internal/lines", "internal/guestnet"))
}
