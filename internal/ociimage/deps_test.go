package ociimage

import (
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the standard library, go-containerregistry
// and the template's record (its defaults and layer bound) only. The layer
// store comes in as an ImportFunc, so images are read and tested without
// one, and nothing here writes to the disk.
func TestImports(t *testing.T) {
	std := testenv.StdlibAnd("internal/template")
	testenv.CheckImports(t, func(path string) bool {
		return std(path) || strings.HasPrefix(path, "github.com/google/go-containerregistry/")
	})
}
