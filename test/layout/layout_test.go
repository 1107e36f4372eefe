// Package layout checks the shape of the source tree: every package says
// what it is for.
package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestEveryPackageHasADocComment(t *testing.T) {
	root := filepath.Join("..", "..")
	dirs := map[string]bool{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "sdk" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			dirs[filepath.Dir(p)] = true
		}
		return nil
	})
	if len(dirs) < 10 {
		t.Fatalf("found only %d packages: is the walk wrong?", len(dirs))
	}
	for dir := range dirs {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		for name, pkg := range pkgs {
			documented := false
			for _, f := range pkg.Files {
				documented = documented || (f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "")
			}
			if !documented {
				t.Errorf("package %s in %s has no doc comment", name, dir)
			}
		}
	}
}
