package accounts

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: of this module only the domain (error kinds), the store it keeps accounts and keys
// in, billing, by which trial hours are counted, and the shared defaults (the default size and concurrency). No wire contract and no HTTP: the API decodes and answers, the
// rules only decide.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages("internal/sandbox", "internal/store", "internal/billing", "internal/defaults"))
	testenv.CheckImports(t, func(path string) bool { return path != "net/http" })
}
