package client

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hostileServer serves archive as every download, whatever the path asked;
// its stat answers {"path": "/..", "type": "dir"}, which Download must
// never ask for.
func hostileServer(t *testing.T, archive []byte) (*Client, *atomic.Int32) {
	var stats atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/stat", func(w http.ResponseWriter, r *http.Request) {
		stats.Add(1)
		writeJSON(w, 200, map[string]any{"name": "..", "path": "/..", "type": "dir"})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/archive", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-tar")
		w.Write(archive)
	})
	return newTestClient(t, mux), &stats
}

// listTree lists every path under root as "rel=content", "rel/" for a
// directory and "rel->target" for a link, sorted.
func listTree(t *testing.T, root string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, rel+"->"+target)
		case d.IsDir():
			out = append(out, rel+"/")
		default:
			b, _ := os.ReadFile(p)
			out = append(out, rel+"="+string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func sortedFields(s string) string {
	f := strings.Fields(s)
	sort.Strings(f)
	return strings.Join(f, " ")
}

func file(name, body string) entry { return entry{name: name, typ: tar.TypeReg, body: body} }
func dir(name string) entry        { return entry{name: name, typ: tar.TypeDir} }

// Each case starts from base/home holding .bashrc (and base/home/proj,
// an empty directory), downloads src to dst (relative to base), and
// compares the whole of base afterwards.
func TestDownloadDecidesFromTheArchive(t *testing.T) {
	const before = ".bashrc=mine home/ home/.bashrc=mine home/proj/"
	tests := []struct {
		name     string
		src, dst string
		archive  []entry
		want     string // the tree of base after, sorted, with home/ prefixed paths
		wantErr  error
		wantDir  bool
	}{
		{"one file onto a directory lands inside under its own name", "/w/out.txt", "home",
			[]entry{file("out.txt", "data")}, before + " home/out.txt=data", nil, false},
		{"one file onto a missing path becomes it", "/w/out.txt", "home/new.txt",
			[]entry{file("out.txt", "data")}, before + " home/new.txt=data", nil, false},
		{"one file onto a file replaces it", "/w/out.txt", "home/.bashrc",
			[]entry{file("out.txt", "data")}, ".bashrc=mine home/ home/.bashrc=data home/proj/", nil, false},
		{"one file onto a missing directory with a slash", "/w/out.txt", "home/nodir/",
			[]entry{file("out.txt", "data")}, before, fs.ErrNotExist, false},
		{"one file onto a file with a slash", "/w/out.txt", "home/.bashrc/",
			[]entry{file("out.txt", "data")}, before, ErrDestination, false},
		{"one file onto a directory of its name", "/w/proj", "home",
			[]entry{file("proj", "data")}, before, ErrDestination, false},
		{"a link alone is made as a link", "/w/l", "home",
			[]entry{{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"}}, before + " home/l->/etc/passwd", nil, false},

		// The race of issue 22: the stat saw a file, the archive holds a
		// directory with .bashrc. It lands in home/out.txt, never in home.
		{"a directory where a file was expected lands under the source's name", "/w/out.txt", "home",
			[]entry{file(".bashrc", "pwned")}, before + " home/out.txt/ home/out.txt/.bashrc=pwned", nil, true},
		{"a first entry named as the source, then more, is a directory", "/w/out.txt", "home",
			[]entry{file("out.txt", "first"), file(".bashrc", "pwned")},
			before + " home/out.txt/ home/out.txt/.bashrc=pwned home/out.txt/out.txt=first", nil, true},
		{"a directory's first entry named as the source, then a directory", "/w/out.txt", "home",
			[]entry{file("out.txt", "first"), dir("sub/"), file("sub/x", "x")},
			before + " home/out.txt/ home/out.txt/out.txt=first home/out.txt/sub/ home/out.txt/sub/x=x", nil, true},
		{"an empty archive is an empty directory", "/w/empty", "home",
			nil, before + " home/empty/", nil, true},
		{"a directory onto a missing path becomes it", "/w/results", "home/new",
			[]entry{dir("a/"), file("a/b", "b")}, before + " home/new/ home/new/a/ home/new/a/b=b", nil, true},
		{"a directory onto a file", "/w/results", "home/.bashrc",
			[]entry{file("x", "x")}, before, ErrDestination, false},
		{"a directory into a directory of its name merges", "/w/proj", "home",
			[]entry{file("x", "x")}, before + " home/proj/x=x", nil, true},
		{"contents with /. go into the directory", "/w/results/.", "home/proj",
			[]entry{file("x", "x")}, before + " home/proj/x=x", nil, true},
		{"contents with /. onto a missing path", "/w/results/.", "home/c",
			[]entry{file("x", "x")}, before + " home/c/ home/c/x=x", nil, true},
		{"the root's contents", "/", "home/proj",
			[]entry{file("x", "x")}, before + " home/proj/x=x", nil, true},

		// Unsafe entries after a staged first one: nothing outside, no
		// temporary file left.
		{"a staged file then a climbing entry", "/w/out.txt", "home",
			[]entry{file("out.txt", "first"), file("../../evil", "x")}, before, ErrUnsafePath, false},
		{"an unsafe first entry", "/w/out.txt", "home",
			[]entry{file("../out.txt", "x")}, before, ErrUnsafePath, false},

		// Devices and FIFOs are refused, never dropped silently, and a
		// merge that would turn a directory into a file is the
		// destination's refusal, not an internal error.
		{"a FIFO in a directory", "/w/results", "home/new",
			[]entry{file("a", "a"), {name: "pipe", typ: tar.TypeFifo}}, before + " home/new/ home/new/a=a", ErrUnsafePath, false},
		{"a character device in a directory", "/w/results", "home/new",
			[]entry{{name: "null", typ: tar.TypeChar}}, before + " home/new/", ErrUnsafePath, false},
		{"a merge replacing a directory with a file", "/w/home", "",
			[]entry{file("proj", "x")}, before, ErrDestination, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			home := filepath.Join(base, "home")
			for _, d := range []string{home, filepath.Join(home, "proj")} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range []string{filepath.Join(base, ".bashrc"), filepath.Join(home, ".bashrc")} {
				if err := os.WriteFile(p, []byte("mine"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c, stats := hostileServer(t, makeTar(t, tt.archive...))
			dst := filepath.Join(base, tt.dst)
			if strings.HasSuffix(tt.dst, "/") {
				dst += "/"
			}
			res, err := c.Download(t.Context(), "s", tt.src, dst)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			case err == nil && res.Dir != tt.wantDir:
				t.Errorf("got Dir %v, want %v", res.Dir, tt.wantDir)
			}
			if got, want := listTree(t, base), sortedFields(tt.want); got != want {
				t.Errorf("got tree\n  %s\nwant\n  %s", got, tt.want)
			}
			if n := stats.Load(); n != 0 {
				t.Errorf("got %d stat calls, want none: the archive decides", n)
			}
		})
	}
}

func TestDownloadKeepsTheFilesMode(t *testing.T) {
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	var buf strings.Builder
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "run.sh", Typeflag: tar.TypeReg, Mode: 0o750, Size: 2, ModTime: mtime})
	tw.Write([]byte("hi"))
	tw.Close()
	c, _ := hostileServer(t, []byte(buf.String()))
	dst := filepath.Join(t.TempDir(), "got.sh")
	if _, err := c.Download(t.Context(), "s", "run.sh", dst); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if err != nil || fi.Mode() != 0o750 || !fi.ModTime().Equal(mtime) {
		t.Fatalf("got %v %v (%v), want -rwxr-x--- at %v", fi.Mode(), fi.ModTime(), err, mtime)
	}
}

func TestDownloadRefusesBadSources(t *testing.T) {
	c, _ := hostileServer(t, nil)
	for _, src := range []string{"", "../x", "/w/../x", "a/.."} {
		if _, err := c.Download(t.Context(), "s", src, t.TempDir()); err == nil {
			t.Errorf("Download(%q): got no error", src)
		}
	}
}

// zeroTar streams n entries made by mk, generated as they are sent, then
// the end of the archive.
func zeroTar(w io.Writer, n int, mk func(i int) *tar.Header) error {
	tw := tar.NewWriter(w)
	for i := range n {
		if err := tw.WriteHeader(mk(i)); err != nil {
			return err
		}
	}
	return tw.Close()
}

func TestDownloadBounds(t *testing.T) {
	many := func(i int) *tar.Header {
		return &tar.Header{Name: "f", Typeflag: tar.TypeReg, Mode: 0o644}
	}
	tests := []struct {
		name    string
		serve   func(w io.Writer) error
		opts    []DownloadOption
		maxSent int64 // the most archive bytes the server may have sent
	}{
		{"entries past the bound", func(w io.Writer) error { return zeroTar(w, 101, many) },
			[]DownloadOption{DownloadMaxEntries(100)}, 1 << 20},
		{"an endless archive stops at the entry bound", func(w io.Writer) error { return zeroTar(w, 1<<40, many) },
			[]DownloadOption{DownloadMaxEntries(100)}, 8 << 20},
		{"bytes past the bound", func(w io.Writer) error {
			tw := tar.NewWriter(w)
			for _, n := range []string{"a", "b"} {
				tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Size: 600, Mode: 0o644})
				tw.Write(make([]byte, 600))
			}
			return tw.Close()
		}, []DownloadOption{DownloadMaxBytes(1000)}, 1 << 20},
		{"a file announced past the default bound is refused before any byte", func(w io.Writer) error {
			tw := tar.NewWriter(w)
			tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: DefaultDownloadMaxBytes + 1, Mode: 0o644})
			_, err := io.Copy(tw, zeroReader{})
			return err
		}, nil, 64 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sent atomic.Int64
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-tar")
				tt.serve(countWriter{w, &sent})
			}))
			dst := filepath.Join(t.TempDir(), "out")
			_, err := c.Download(t.Context(), "s", "/w/out", dst, tt.opts...)
			if !errors.Is(err, ErrArchiveTooLarge) {
				t.Fatalf("Download: got %v, want ErrArchiveTooLarge", err)
			}
			if err := c.DownloadDir(t.Context(), "s", "/w/out", dst, tt.opts...); !errors.Is(err, ErrArchiveTooLarge) {
				t.Fatalf("DownloadDir: got %v, want ErrArchiveTooLarge", err)
			}
			if n := sent.Load(); n > 2*tt.maxSent {
				t.Errorf("the server sent %d bytes for two downloads, want at most %d", n, 2*tt.maxSent)
			}
			if _, err := os.Stat(filepath.Join(dst, "big")); err == nil {
				t.Error("the file past the bound was made")
			}
		})
	}
}

// A chain of PAX headers is one endless header and no entry: only the
// bound on the archive's own bytes (MaxBytes plus 4 KiB per entry
// allowed) ends it.
func TestDownloadArchiveBoundWithoutEntries(t *testing.T) {
	opts := []DownloadOption{DownloadMaxEntries(10), DownloadMaxBytes(1000)}
	limit := newDownloadOptions(opts).archiveLimit()
	var sent atomic.Int64
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := countWriter{w, &sent}
		block := paxHeaderBlock()
		for {
			if _, err := cw.Write(block); err != nil {
				return
			}
		}
	}))
	err := c.DownloadDir(t.Context(), "s", "/w", t.TempDir(), opts...)
	if !errors.Is(err, ErrArchiveTooLarge) {
		t.Fatalf("got %v, want ErrArchiveTooLarge", err)
	}
	if n := sent.Load(); n > limit+(8<<20) {
		t.Errorf("the server sent %d bytes, want about %d", n, limit)
	}
}

// paxHeaderBlock is a PAX extended header ("x") with one record, padded:
// a chain of them is one endless header.
func paxHeaderBlock() []byte {
	var b strings.Builder
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Format: tar.FormatPAX,
		PAXRecords: map[string]string{"comment": strings.Repeat("x", 300)}})
	s := b.String()
	return []byte(s[:1024]) // the "x" header and its records, without the entry
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

type countWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// A million entries and one against the default bounds: generated as they
// are sent (zero-size, all the same directory, so the disk is not the
// measure), refused at the millionth and first with the heap flat.
func TestDownloadMillionEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 1,000,001 entries (about 0.5 GB of headers)")
	}
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-tar")
		zeroTar(w, DefaultDownloadMaxEntries+1, func(i int) *tar.Header {
			return &tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}
		})
	}))
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		}
	}()
	start := time.Now()
	_, err := c.Download(t.Context(), "s", "/w/tree", filepath.Join(t.TempDir(), "tree"))
	took := time.Since(start)
	close(stop)
	<-done
	if !errors.Is(err, ErrArchiveTooLarge) || !strings.Contains(err.Error(), "more than 1000000 entries") {
		t.Fatalf("got %v, want ErrArchiveTooLarge past 1000000 entries", err)
	}
	grew := int64(peak.Load()) - int64(base)
	t.Logf("1,000,001 entries refused in %v; heap in use grew by at most %d KiB (server and client in one process)", took, grew>>10)
	if grew > 64<<20 {
		t.Errorf("the heap grew by %d MiB, want under 64 MiB", grew>>20)
	}
}
