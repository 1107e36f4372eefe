package agent

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports fences the agent's dependencies: it ships into every sandbox
// and must stay small.
func TestImports(t *testing.T) {
	allowed := map[string]bool{
		"github.com/withruntime/withruntime/api": true,
		"golang.org/x/sys/unix":                  true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			std := !strings.Contains(strings.Split(path, "/")[0], ".")
			if !std && !allowed[path] {
				t.Errorf("%s imports %s: the agent may import only the standard library, x/sys/unix and api", name, path)
			}
		}
	}
}
