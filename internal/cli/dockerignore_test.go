package cli

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/withruntime/withruntime/client"
)

// The build context leaves out what .dockerignore names, as Docker does:
// globs, directories with all below them, "**", and "!" taking one back.
func TestContextDockerignore(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"app.py", "debug.log", "sub/trace.log", "node_modules/x/index.js", "secret/key",
		"docs/a.md", "docs/deep/b.md", "docs/keep.md", "keep.log", ".git/HEAD"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, ".dockerignore"), []byte("# comment\n**/*.log\n!keep.log\nnode_modules\nsecret/\ndocs/**\n!docs/keep.md\n.git\n"), 0o644)
	skip, err := contextSkip(dir)
	if err != nil || skip == nil {
		t.Fatalf("contextSkip: %v", err)
	}
	var buf bytes.Buffer
	if err := client.WriteTarSkipping(&buf, dir, skip); err != nil {
		t.Fatal(err)
	}
	var files []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files = append(files, h.Name)
		}
	}
	slices.Sort(files)
	want := []string{".dockerignore", "app.py", "docs/keep.md", "keep.log"}
	if !slices.Equal(files, want) {
		t.Errorf("context files: got %q, want %q", files, want)
	}

	// No .dockerignore: everything; a bad pattern: refused by name.
	if skip, err := contextSkip(t.TempDir()); skip != nil || err != nil {
		t.Errorf("a context without .dockerignore: %v %v", skip != nil, err)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, ".dockerignore"), []byte("[unterminated\n"), 0o644)
	if _, err := contextSkip(bad); err == nil {
		t.Error("a bad pattern was taken")
	}
}
