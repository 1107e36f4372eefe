package agent

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// TestExtractRefusesSpecialEntries checks that an entry that is not a file,
// a directory or a link stops the upload with 400 naming it, instead of
// being dropped under a 200: the entries before it stay, and the refused
// one leaves nothing, not even its parent directory.
func TestExtractRefusesSpecialEntries(t *testing.T) {
	tests := []struct {
		name     string
		typ      byte
		wantKind string
	}{
		{name: "character device", typ: tar.TypeChar, wantKind: "a character device"},
		{name: "block device", typ: tar.TypeBlock, wantKind: "a block device"},
		{name: "fifo", typ: tar.TypeFifo, wantKind: "a FIFO"},
		{name: "contiguous file", typ: tar.TypeCont, wantKind: "a contiguous file"},
		{name: "unknown type", typ: 'Z', wantKind: `of type 'Z'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestAgent(t)
			body := makeTar(t,
				tarEntry{name: "ok.txt", body: "ok"},
				tarEntry{name: "sub/special", typ: tt.typ},
				tarEntry{name: "after.txt", body: "after"},
			)
			msg := a.wantError("PUT", "/archive"+q("dst"), bytes.NewReader(body), http.StatusBadRequest, "invalid_request")
			if want := `archive entry "sub/special" is ` + tt.wantKind; !strings.Contains(msg, want) {
				t.Errorf("got message %q, want it to contain %q", msg, want)
			}
			want := []string{"ok.txt = ok -rw-r--r--"}
			if got := tree(t, filepath.Join(a.cfg.Workspace, "dst")); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("got %q in the destination, want %q", got, want)
			}
		})
	}
}

// TestExtractSkipsGlobalHeader checks that a pax global header (git archive
// writes one) is not an entry: the upload succeeds and counts the file.
func TestExtractSkipsGlobalHeader(t *testing.T) {
	a := newTestAgent(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, hdr := range []*tar.Header{
		{Name: "pax_global_header", Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "0123abcd"}},
		{Name: "f.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1},
	} {
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
	}
	tw.Write([]byte("x"))
	tw.Close()
	var res api.ArchiveResult
	a.doJSON("PUT", "/archive"+q("dst"), &buf, http.StatusOK, &res)
	if res.Files != 1 {
		t.Errorf("got %d files, want 1", res.Files)
	}
	if got := tree(t, filepath.Join(a.cfg.Workspace, "dst")); len(got) != 1 || got[0] != "f.txt = x -rw-r--r--" {
		t.Errorf("got %q, want only f.txt", got)
	}
}

// emptyEntries is a tar stream made as it is read: n zero-byte entries
// named by name. written counts the headers handed to the reader.
func emptyEntries(n int, name func(i int) string, typ byte, written *atomic.Int64) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		for i := range n {
			if err := tw.WriteHeader(&tar.Header{Name: name(i), Typeflag: typ, Mode: 0o755}); err != nil {
				pw.CloseWithError(err)
				return
			}
			written.Add(1)
		}
		pw.CloseWithError(tw.Close())
	}()
	return pr
}

// TestExtractMillionEntries streams a million zero-byte entries, made as
// they are read, at the extractor and at the agent's route: the
// extraction stops at maxArchiveEntries with payload_too_large, having
// read no further than that. The entries name the destination itself, so
// that the test spends its time on the count, not on the file system (a
// million real files took 90 s: see maxArchiveEntries).
func TestExtractMillionEntries(t *testing.T) {
	const n = 1_000_000
	dot := func(int) string { return "./" }

	t.Run("extractor", func(t *testing.T) {
		var written atomic.Int64
		r := emptyEntries(n, dot, tar.TypeDir, &written)
		defer r.Close()
		dir := t.TempDir()
		x := &extractor{dest: dir, uid: os.Getuid(), gid: os.Getgid()}
		err := x.extract(r)
		var re *reqError
		if !errors.As(err, &re) || re.code != codeTooLarge {
			t.Fatalf("got %v, want payload_too_large", err)
		}
		if want := fmt.Sprintf("more than %d entries", maxArchiveEntries); !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to say %q", err, want)
		}
		// The pipe lets the writer run one header ahead of the reader.
		if got := written.Load(); got > maxArchiveEntries+2 {
			t.Errorf("got %d entries read, want the extraction to stop at %d", got, maxArchiveEntries+1)
		}
	})

	t.Run("route", func(t *testing.T) {
		a := newTestAgent(t)
		var written atomic.Int64
		r := emptyEntries(n, dot, tar.TypeDir, &written)
		defer r.Close()
		a.wantError("PUT", "/archive"+q("dst"), r, http.StatusRequestEntityTooLarge, "payload_too_large")
	})
}

// TestExtractEntryCapKeepsBefore checks, with real files and a small
// bound, what an archive past the bound leaves: the entries before it,
// and nothing of the one past it.
func TestExtractEntryCapKeepsBefore(t *testing.T) {
	var written atomic.Int64
	r := emptyEntries(10, func(i int) string { return fmt.Sprintf("d%d/f%d", i, i) }, tar.TypeReg, &written)
	defer r.Close()
	dir := t.TempDir()
	x := &extractor{dest: dir, uid: os.Getuid(), gid: os.Getgid(), max: 3}
	var re *reqError
	if err := x.extract(r); !errors.As(err, &re) || re.code != codeTooLarge {
		t.Fatalf("got %v, want payload_too_large", err)
	}
	want := []string{"d0/", "d0/f0 =  -rwxr-xr-x", "d1/", "d1/f1 =  -rwxr-xr-x", "d2/", "d2/f2 =  -rwxr-xr-x"}
	if got := tree(t, dir); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
	if x.res.Files != 3 {
		t.Errorf("got %d files counted, want 3", x.res.Files)
	}
}
