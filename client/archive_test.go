package client

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// archiveServer stores the tar of the last upload and serves it back as
// the download, so a round trip goes through the client's tar writer and
// its extractor.
func archiveServer(t *testing.T) (*Client, *[]byte, *string) {
	var stored []byte
	var uploadPath string
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/sandboxes/{id}/archive", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/x-tar" {
			writeError(w, 400, "invalid_request", "content type")
			return
		}
		uploadPath = r.URL.Query().Get("path")
		b, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, 400, "invalid_request", err.Error())
			return
		}
		stored = b
		var res api.ArchiveResult
		tr := tar.NewReader(bytes.NewReader(b))
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeError(w, 400, "invalid_request", err.Error())
				return
			}
			res.Files++
			res.Bytes += hdr.Size
		}
		writeJSON(w, 200, res)
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/archive", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-tar")
		w.Write(stored)
	})
	return newTestClient(t, mux), &stored, &uploadPath
}

func writeTree(t *testing.T, root string) {
	t.Helper()
	long := strings.Repeat("long-name-", 12) + ".txt" // past ustar's 100 bytes
	for name, content := range map[string]string{
		"a/b.txt":         "bee\n",
		"a/run.sh":        "#!/bin/sh\necho hi\n",
		"deep/x/y/z.txt":  "zed",
		"empty.txt":       "",
		"deep/" + long:    "long",
		"with space/ü.md": "unicode",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "a/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "emptydir"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a/b.txt", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "abslink")); err != nil {
		t.Fatal(err)
	}
}

// describeTree lists a tree as "name type mode content-or-target" lines.
func describeTree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := filepath.ToSlash(rel) + " " + info.Mode().String()
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case info.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		if rel != "." {
			lines = append(lines, line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func TestUploadDownloadDirRoundTrip(t *testing.T) {
	c, _, uploadPath := archiveServer(t)
	src := t.TempDir()
	writeTree(t, src)

	res, err := c.UploadDir(t.Context(), "s", src, "/workspace/proj")
	if err != nil {
		t.Fatal(err)
	}
	if *uploadPath != "/workspace/proj" {
		t.Errorf("upload path: got %q", *uploadPath)
	}
	// 6 files, 2 symlinks, and the directories a, deep, deep/x, deep/x/y,
	// with space, emptydir.
	if res.Files != 14 {
		t.Errorf("archive entries: got %d, want 14", res.Files)
	}

	dst := filepath.Join(t.TempDir(), "out")
	if err := c.DownloadDir(t.Context(), "s", "/workspace/proj", dst); err != nil {
		t.Fatal(err)
	}
	if got, want := describeTree(t, dst), describeTree(t, src); got != want {
		t.Errorf("downloaded tree differs:\ngot:\n%s\nwant:\n%s", got, want)
	}
	// A second download over the first overwrites it.
	if err := c.DownloadDir(t.Context(), "s", "/workspace/proj", dst); err != nil {
		t.Fatalf("download over an earlier one: %v", err)
	}
}

func TestUploadDirErrors(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 413, "payload_too_large", "archive too large")
	}))
	src := t.TempDir()
	writeTree(t, src)
	if _, err := c.UploadDir(t.Context(), "s", src, "/x"); !errors.Is(err, ErrPayloadTooLarge) {
		t.Errorf("refused upload: got %v, want payload_too_large", err)
	}
	if _, err := c.UploadDir(t.Context(), "s", filepath.Join(src, "a/b.txt"), "/x"); err == nil {
		t.Error("upload of a file as a directory: got no error")
	}
	if _, err := c.UploadDir(t.Context(), "s", filepath.Join(src, "missing"), "/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing directory: got %v", err)
	}
}

type entry struct {
	name, link string
	typ        byte
	body       string
}

func makeTar(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	tw.Close()
	return buf.Bytes()
}

func TestDownloadDirRefusesUnsafeEntries(t *testing.T) {
	tests := []struct {
		name    string
		entries func(outside string) []entry
		prepare func(t *testing.T, dst, outside string)
	}{
		{"dot dot", func(string) []entry {
			return []entry{{name: "../evil", typ: tar.TypeReg, body: "x"}}
		}, nil},
		{"dot dot inside", func(string) []entry {
			return []entry{{name: "a/../../evil", typ: tar.TypeReg, body: "x"}}
		}, nil},
		{"absolute", func(outside string) []entry {
			return []entry{{name: filepath.ToSlash(filepath.Join(outside, "evil")), typ: tar.TypeReg, body: "x"}}
		}, nil},
		{"through symlink out", func(outside string) []entry {
			return []entry{
				{name: "link", typ: tar.TypeSymlink, link: outside},
				{name: "link/evil", typ: tar.TypeReg, body: "x"},
			}
		}, nil},
		{"through symlink in", func(string) []entry {
			return []entry{
				{name: "sub/", typ: tar.TypeDir},
				{name: "link", typ: tar.TypeSymlink, link: "sub"},
				{name: "link/evil", typ: tar.TypeReg, body: "x"},
			}
		}, nil},
		{"dir through symlink", func(outside string) []entry {
			return []entry{
				{name: "link", typ: tar.TypeSymlink, link: outside},
				{name: "link/", typ: tar.TypeDir},
				{name: "link/d/", typ: tar.TypeDir},
			}
		}, nil},
		{"file over symlink", func(outside string) []entry {
			return []entry{
				{name: "f", typ: tar.TypeSymlink, link: filepath.Join(outside, "evil")},
				{name: "f", typ: tar.TypeReg, body: "x"},
			}
		}, nil},
		{"hard link out", func(string) []entry {
			return []entry{{name: "h", typ: tar.TypeLink, link: "../outside/secret"}}
		}, nil},
		{"symlink already there", func(string) []entry {
			return []entry{{name: "pre/evil", typ: tar.TypeReg, body: "x"}}
		}, func(t *testing.T, dst, outside string) {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dst, "pre")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			dst := filepath.Join(base, "dst")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.prepare != nil {
				tt.prepare(t, dst, outside)
			}
			archive := makeTar(t, tt.entries(outside)...)
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write(archive)
			}))
			err := c.DownloadDir(t.Context(), "s", "/workspace", dst)
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("got %v, want ErrUnsafePath", err)
			}
			names, _ := os.ReadDir(outside)
			if len(names) != 1 {
				t.Errorf("the outside directory changed: %v", names)
			}
			if _, err := os.Lstat(filepath.Join(base, "evil")); err == nil {
				t.Error("a file was written beside the target")
			}
			if _, err := os.Lstat(filepath.Join(dst, "sub", "evil")); err == nil {
				t.Error("a file was written through a symbolic link inside the target")
			}
		})
	}
}

func TestDownloadDirAcceptsDotNames(t *testing.T) {
	archive := makeTar(t,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "./a/", typ: tar.TypeDir},
		entry{name: "./a/b.txt", typ: tar.TypeReg, body: "b"},
		entry{name: "c/d.txt", typ: tar.TypeReg, body: "d"}, // parent not in the archive
		entry{name: "e..f", typ: tar.TypeReg, body: "dots in a name are fine"},
	)
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(archive) }))
	dst := t.TempDir()
	if err := c.DownloadDir(t.Context(), "s", "/workspace", dst); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a/b.txt": "b", "c/d.txt": "d", "e..f": "dots in a name are fine"} {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != want {
			t.Errorf("%s: got %q, %v; want %q", name, b, err, want)
		}
	}
}

func TestDownloadDirBrokenStream(t *testing.T) {
	archive := makeTar(t, entry{name: "big", typ: tar.TypeReg, body: strings.Repeat("x", 1<<16)})
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "200000")
		w.Write(archive[:4096])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	err := c.DownloadDir(t.Context(), "s", "/workspace", t.TempDir())
	var te *TransportError
	if !errors.As(err, &te) {
		t.Fatalf("got %T %v, want *TransportError", err, err)
	}
}
