package defaults

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module only the domain (the
// isolations' names), so that the manager, the control plane, the account
// rules and billing may all read their defaults here.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/sandbox"))
}
