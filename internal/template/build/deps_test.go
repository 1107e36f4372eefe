package build

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it parses, checks and hashes, so it
// needs only the template's names (internal/template) and the rule for
// environment names (internal/envname).
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("internal/template", "internal/envname"))
}
