package testenv

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Module is this project's module path.
const Module = "github.com/withruntime/withruntime"

// ImportRule says whether a package may import path.
type ImportRule func(path string) bool

// OwnPackages allows anything outside this module and, of this module,
// only the packages named (relative to the module, such as "api" or
// "internal/sandbox").
func OwnPackages(allowed ...string) ImportRule {
	return func(path string) bool {
		if path != Module && !strings.HasPrefix(path, Module+"/") {
			return true
		}
		for _, a := range allowed {
			if path == Module+"/"+a {
				return true
			}
		}
		return false
	}
}

// StdlibAnd allows the standard library and exactly the paths named (full
// import paths, or module-relative ones).
func StdlibAnd(allowed ...string) ImportRule {
	return func(path string) bool {
		if !strings.Contains(strings.Split(path, "/")[0], ".") {
			return true
		}
		for _, a := range allowed {
			if path == a || path == Module+"/"+a {
				return true
			}
		}
		return false
	}
}

// CheckImports fails t for every import of the package in the current
// directory (its non-test files) that rule refuses: the dependency fence
// the package's doc comment states.
func CheckImports(t *testing.T, rule ImportRule) {
	t.Helper()
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
			if !rule(path) {
				t.Errorf("%s imports %s, which the package's fence does not allow", name, path)
			}
		}
	}
}
