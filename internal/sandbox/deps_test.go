package sandbox

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: everything depends on the domain, so it imports nothing of this module but internal/envname (the rule for environment names it shares with the wire).
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/envname"))
}
