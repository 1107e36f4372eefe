package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On a terminal, an import shows the bytes sent, and ends the line; off a
// terminal (the other tests) it prints nothing but its result.
func TestTemplateImportShowsProgressOnATerminal(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	p := openPty(t)
	archive := filepath.Join(t.TempDir(), "app.tar")
	data := "image:" + strings.Repeat("x", 3<<20-6)
	if err := os.WriteFile(archive, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := (&App{}).Main([]string{"template", "import", "-t", "app", archive}, strings.NewReader(""), &out, p.tty)
	if code != 0 || out.String() != "app:latest\ttpl_000000000000000a\n" {
		t.Fatalf("import: exit %d stdout %q, terminal %q", code, out.String(), p.shown())
	}
	p.waitFor(t, "sent 3.0MiB of 3.0MiB\r\n")

	// An archive from stdin is never read from a terminal.
	code = (&App{}).Main([]string{"template", "import", "-t", "app", "-"}, p.tty, &out, p.tty)
	if code != 1 {
		t.Errorf("import - from a terminal: exit %d, want 1", code)
	}
	p.waitFor(t, "error: invalid_request: standard input is a terminal: pipe the archive in")
	if len(f.imports) != 1 {
		t.Errorf("imports sent: got %d, want the file's only", len(f.imports))
	}
}
