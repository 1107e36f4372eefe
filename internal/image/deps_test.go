package image_test

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: it knows recipes and directories only.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages())
}
