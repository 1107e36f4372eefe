package agent

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func makeTar(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Mode: mode, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body[:hdr.Size])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarNames(t *testing.T, b []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("reading archive: %v", err)
		}
		if hdr.Format != tar.FormatPAX {
			t.Errorf("got format %v for %s, want PAX", hdr.Format, hdr.Name)
		}
		names = append(names, hdr.Name)
	}
}

// tree lists everything under root as "path:kind" lines, sorted.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, rel+" -> "+target)
		case fi.IsDir():
			out = append(out, rel+"/")
		default:
			b, _ := os.ReadFile(p)
			out = append(out, rel+" = "+string(b)+" "+fi.Mode().Perm().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestArchiveRoundTrip(t *testing.T) {
	a := newTestAgent(t)
	ws := a.cfg.Workspace
	a.write("src/a.txt", "alpha")
	a.write("src/sub/b.sh", "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(ws, "src/sub/b.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "src/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(ws, "src/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(ws, "src/sub/outside")); err != nil {
		t.Fatal(err)
	}

	resp, tarball := a.do("GET", "/archive"+q("src"), nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("got %d %q, want 200 application/x-tar", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	got := strings.Join(tarNames(t, tarball), " ")
	if want := "a.txt empty/ link sub/ sub/b.sh sub/outside"; got != want {
		t.Errorf("got entries %q, want %q (the symlink to /etc stored, not followed)", got, want)
	}

	var res api.ArchiveResult
	a.doJSON("PUT", "/archive"+q("dst/new"), bytes.NewReader(tarball), http.StatusOK, &res)
	if res.Files != 4 || res.Bytes != int64(len("alpha")+len("#!/bin/sh\n")) {
		t.Errorf("got %+v, want 4 files and 15 bytes", res)
	}
	if src, dst := tree(t, filepath.Join(ws, "src")), tree(t, filepath.Join(ws, "dst/new")); strings.Join(src, "\n") != strings.Join(dst, "\n") {
		t.Errorf("got extracted tree\n%s\nwant\n%s", strings.Join(dst, "\n"), strings.Join(src, "\n"))
	}

	// One file archives as a single entry named after it.
	_, tarball = a.do("GET", "/archive"+q("src/a.txt"), nil)
	if got := tarNames(t, tarball); len(got) != 1 || got[0] != "a.txt" {
		t.Errorf("got entries %q, want [a.txt]", got)
	}
	a.wantError("GET", "/archive"+q("nope"), nil, 404, "not_found")
	a.wantError("GET", "/archive"+q("../x"), nil, 400, "invalid_request")
}

func TestExtractAttacks(t *testing.T) {
	tests := []struct {
		name    string
		entries func(outside string) []tarEntry
		// wantIn lists what must exist in the destination afterwards.
		wantIn []string
	}{
		{name: "dotdot", entries: func(string) []tarEntry {
			return []tarEntry{{name: "ok.txt", body: "ok"}, {name: "../evil", body: "x"}, {name: "after.txt", body: "x"}}
		}, wantIn: []string{"ok.txt = ok -rw-r--r--"}},
		{name: "inner dotdot", entries: func(string) []tarEntry {
			return []tarEntry{{name: "a/../../evil", body: "x"}}
		}},
		{name: "absolute", entries: func(outside string) []tarEntry {
			return []tarEntry{{name: outside + "/evil", body: "x"}}
		}},
		{name: "write through a symlink entry", entries: func(outside string) []tarEntry {
			return []tarEntry{{name: "esc", typ: tar.TypeSymlink, link: outside}, {name: "esc/evil", body: "x"}}
		}, wantIn: []string{"esc -> OUTSIDE"}},
		{name: "directory through a symlink entry", entries: func(outside string) []tarEntry {
			return []tarEntry{{name: "esc", typ: tar.TypeSymlink, link: outside}, {name: "esc/sub/", typ: tar.TypeDir, mode: 0o755}}
		}, wantIn: []string{"esc -> OUTSIDE"}},
		{name: "deep write through a symlink entry", entries: func(outside string) []tarEntry {
			return []tarEntry{{name: "d/", typ: tar.TypeDir, mode: 0o755}, {name: "d/esc", typ: tar.TypeSymlink, link: outside}, {name: "d/esc/x/evil", body: "x"}}
		}, wantIn: []string{"d/", "d/esc -> OUTSIDE"}},
		{name: "symlink through a symlink entry", entries: func(outside string) []tarEntry {
			return []tarEntry{{name: "esc", typ: tar.TypeSymlink, link: outside}, {name: "esc/evil", typ: tar.TypeSymlink, link: "/etc/passwd"}}
		}, wantIn: []string{"esc -> OUTSIDE"}},
		{name: "hard link out", entries: func(outside string) []tarEntry {
			return []tarEntry{{name: "evil", typ: tar.TypeLink, link: outside + "/target"}}
		}},
		{name: "hard link up", entries: func(string) []tarEntry {
			return []tarEntry{{name: "evil", typ: tar.TypeLink, link: "../outside/target"}}
		}},
		{name: "hard link to a symlink entry", entries: func(outside string) []tarEntry {
			return []tarEntry{{name: "esc", typ: tar.TypeSymlink, link: outside + "/target"}, {name: "evil", typ: tar.TypeLink, link: "esc"}}
		}, wantIn: []string{"esc -> OUTSIDE/target"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestAgent(t)
			outside := t.TempDir()
			target := filepath.Join(outside, "target")
			if err := os.WriteFile(target, []byte("orig"), 0o644); err != nil {
				t.Fatal(err)
			}
			body := makeTar(t, tt.entries(outside)...)
			a.wantError("PUT", "/archive"+q("dst"), bytes.NewReader(body), 400, "invalid_request")

			if got := tree(t, outside); len(got) != 1 || got[0] != "target = orig -rw-r--r--" {
				t.Errorf("got %q outside, want only the untouched target", got)
			}
			if got := tree(t, a.cfg.Workspace); len(got) == 0 || got[0] != "dst/" {
				t.Errorf("got %q in the workspace, want only dst", got)
			}
			var want []string
			for _, w := range tt.wantIn {
				want = append(want, strings.ReplaceAll(w, "OUTSIDE", outside))
			}
			if got := tree(t, filepath.Join(a.cfg.Workspace, "dst")); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("got %q in the destination, want %q", got, want)
			}
		})
	}
}

func TestExtractReplaces(t *testing.T) {
	a := newTestAgent(t)
	outside := t.TempDir()
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, []byte("orig"), 0o644); err != nil {
		t.Fatal(err)
	}
	body := makeTar(t,
		tarEntry{name: "f", typ: tar.TypeSymlink, link: target},
		tarEntry{name: "f", body: "new", mode: 0o4755},        // replaces the link, setuid dropped
		tarEntry{name: "./d/g", body: "gg", mode: 0o600},      // parent made
		tarEntry{name: "d/h", typ: tar.TypeLink, link: "d/g"}, // hard link inside
		tarEntry{name: "venv/bin/python", typ: tar.TypeSymlink, link: "/usr/bin/python3"},
	)
	var res api.ArchiveResult
	a.doJSON("PUT", "/archive"+q("dst"), bytes.NewReader(body), http.StatusOK, &res)
	if b, _ := os.ReadFile(target); string(b) != "orig" {
		t.Errorf("got %q in the symlink's target, want it untouched", b)
	}
	want := []string{
		"d/",
		"d/g = gg -rw-------",
		"d/h = gg -rw-------",
		"f = new -rwxr-xr-x",
		"venv/",
		"venv/bin/",
		"venv/bin/python -> /usr/bin/python3",
	}
	if got := tree(t, filepath.Join(a.cfg.Workspace, "dst")); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.Files != 5 || res.Bytes != 5 {
		t.Errorf("got %+v, want 5 files, 5 bytes", res)
	}
	fi, err := os.Stat(filepath.Join(a.cfg.Workspace, "dst/f"))
	if err != nil || fi.ModTime().Unix() != 1700000000 {
		t.Errorf("got mtime %v (%v), want the archive's", fi.ModTime(), err)
	}

	// A file entry never replaces a directory.
	a.wantError("PUT", "/archive"+q("dst"), bytes.NewReader(makeTar(t, tarEntry{name: "d", body: "x"})), 400, "invalid_request")
	// Garbage is not an archive.
	a.wantError("PUT", "/archive"+q("dst"), strings.NewReader(strings.Repeat("garbage!", 100)), 400, "invalid_request")
	// Extracting into a file is a conflict.
	a.wantError("PUT", "/archive"+q("dst/f"), bytes.NewReader(makeTar(t)), 409, "conflict")
}
