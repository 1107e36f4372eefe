package httpapi

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports fences the package: of this module it may import only the
// wire contract, the domain and the store (see the package comment).
func TestImports(t *testing.T) {
	allowed := map[string]bool{
		"github.com/withruntime/withruntime/api":              true,
		"github.com/withruntime/withruntime/internal/sandbox": true,
		"github.com/withruntime/withruntime/internal/store":   true,
	}
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/withruntime/withruntime") && !allowed[path] {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
