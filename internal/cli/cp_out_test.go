package cli

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// hostileAPI stands in for the API with a hostile agent behind it: its
// stat answers stat (whatever the path), its archive is archive.
func hostileAPI(t *testing.T, stat map[string]any, archive func(w io.Writer)) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.Sandbox{ID: r.PathValue("id"), State: "running"})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/stat", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, stat)
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/archive", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-tar")
		archive(w)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	useServer(t, srv.URL)
}

type tarEntry struct {
	name, body string
	dir        bool
}

func writeTarEntries(w io.Writer, entries ...tarEntry) {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.body))}
		if e.dir {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		tw.WriteHeader(hdr)
		io.WriteString(tw, e.body)
	}
	tw.Close()
}

// treeOf lists every path under root, "rel/" for a directory and
// "rel=content" for a file, sorted.
func treeOf(t *testing.T, root string) string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case rel == ".":
		case d.IsDir():
			out = append(out, filepath.ToSlash(rel)+"/")
		default:
			b, _ := os.ReadFile(p)
			out = append(out, filepath.ToSlash(rel)+"="+string(b))
		}
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, " ")
}

// The two attacks of issue 22 on "sandbox cp" out of a sandbox, and the
// bounds. Each case starts from base/.bashrc, base/home/.bashrc and
// base/home/proj/ (all the user's), and compares the whole of base after.
func TestCpOutHostileSandbox(t *testing.T) {
	const before = ".bashrc=mine home/ home/.bashrc=mine home/proj/"
	tests := []struct {
		name     string
		stat     map[string]any
		archive  func(w io.Writer)
		args     []string // "BASE" stands for the base directory
		wantCode int
		wantErr  string // in stderr
		want     string // the tree of base after
	}{
		{
			// The stat's path decided the name: cp SBX:/workspace/results
			// home/proj/ wrote into home. Now the name is "results", from
			// the argument.
			name:    "a stat answering /.. names nothing",
			stat:    map[string]any{"name": "..", "path": "/..", "type": "dir"},
			archive: func(w io.Writer) { writeTarEntries(w, tarEntry{name: ".bashrc", body: "pwned"}) },
			args:    []string{"sbx_a:/workspace/results", "BASE/home/proj/"},
			want:    before + " home/proj/results/ home/proj/results/.bashrc=pwned",
		},
		{
			// The race: the stat saw a file, the archive holds a directory
			// with .bashrc; it was extracted into home.
			name:    "a file turned directory lands under the source's name",
			stat:    map[string]any{"name": "out.txt", "path": "/workspace/out.txt", "type": "file", "size": 4},
			archive: func(w io.Writer) { writeTarEntries(w, tarEntry{name: ".bashrc", body: "pwned"}) },
			args:    []string{"sbx_a:/workspace/out.txt", "BASE/home"},
			want:    before + " home/out.txt/ home/out.txt/.bashrc=pwned",
		},
		{
			name: "a file turned directory whose first entry has the file's name",
			stat: map[string]any{"name": "out.txt", "path": "/workspace/out.txt", "type": "file", "size": 4},
			archive: func(w io.Writer) {
				writeTarEntries(w, tarEntry{name: "out.txt", body: "data"}, tarEntry{name: ".bashrc", body: "pwned"})
			},
			args: []string{"sbx_a:/workspace/out.txt", "BASE/home"},
			want: before + " home/out.txt/ home/out.txt/.bashrc=pwned home/out.txt/out.txt=data",
		},
		{
			name:    "one file lands inside under the argument's name, not the stat's",
			stat:    map[string]any{"name": ".bashrc", "path": "/root/.bashrc", "type": "file", "size": 4},
			archive: func(w io.Writer) { writeTarEntries(w, tarEntry{name: "out.txt", body: "data"}) },
			args:    []string{"sbx_a:/workspace/out.txt", "BASE/home"},
			want:    before + " home/out.txt=data",
		},
		{
			name:     "a directory onto a file is refused",
			stat:     map[string]any{"name": "out.txt", "path": "/workspace/out.txt", "type": "file"},
			archive:  func(w io.Writer) { writeTarEntries(w, tarEntry{name: "x", body: "x"}) },
			args:     []string{"sbx_a:/workspace/out.txt", "BASE/home/.bashrc"},
			wantCode: exitFailure,
			wantErr:  "error: conflict: cannot copy a directory onto file",
			want:     before,
		},
		{
			name: "entries past --max-entries",
			stat: map[string]any{"type": "dir"},
			archive: func(w io.Writer) {
				var es []tarEntry
				for range 11 {
					es = append(es, tarEntry{name: "d/", dir: true})
				}
				writeTarEntries(w, es...)
			},
			args:     []string{"--max-entries", "10", "sbx_a:/workspace/t", "BASE/home/t"},
			wantCode: exitFailure,
			wantErr:  "error: payload_too_large: archive over the download's bound: more than 10 entries",
			want:     before + " home/t/ home/t/d/",
		},
		{
			name: "bytes past --max-bytes",
			stat: map[string]any{"type": "dir"},
			archive: func(w io.Writer) {
				writeTarEntries(w, tarEntry{name: "a", body: strings.Repeat("a", 600)}, tarEntry{name: "b", body: strings.Repeat("b", 600)})
			},
			args:     []string{"--max-bytes", "1K", "sbx_a:/workspace/t", "BASE/home/t"},
			wantCode: exitFailure,
			wantErr:  "raise --max-entries or --max-bytes",
			want:     before + " home/t/ home/t/a=" + strings.Repeat("a", 600),
		},
		{
			name: "an endless archive stops at the default bound on entries",
			stat: map[string]any{"type": "dir"},
			archive: func(w io.Writer) {
				tw := tar.NewWriter(w)
				for tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}) == nil {
				}
			},
			args:     []string{"sbx_a:/workspace/t", "BASE/home/t"},
			wantCode: exitFailure,
			wantErr:  "more than 1000000 entries",
			want:     before + " home/t/ home/t/d/",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if testing.Short() && strings.Contains(tt.name, "endless") {
				t.Skip("streams a million entries")
			}
			base := t.TempDir()
			os.MkdirAll(filepath.Join(base, "home", "proj"), 0o755)
			for _, p := range []string{".bashrc", "home/.bashrc"} {
				os.WriteFile(filepath.Join(base, p), []byte("mine"), 0o644)
			}
			hostileAPI(t, tt.stat, tt.archive)
			args := []string{"sandbox", "cp"}
			for _, a := range tt.args {
				args = append(args, strings.Replace(a, "BASE", base, 1))
			}
			code, _, stderr := run(t, nil, args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("got exit %d stderr %q, want %d and %q", code, stderr, tt.wantCode, tt.wantErr)
			}
			want := strings.Fields(tt.want)
			sort.Strings(want)
			if got := treeOf(t, base); got != strings.Join(want, " ") {
				t.Errorf("got tree\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

func TestCpOutStreamBound(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 5000)
	hostileAPI(t, nil, func(w io.Writer) { w.Write(body) })
	code, stdout, stderr := run(t, nil, "sandbox", "cp", "--max-bytes", "4096", "sbx_a:/workspace/t", "-")
	if code != exitFailure || len(stdout) != 4096 || !strings.Contains(stderr, "error: payload_too_large: ") {
		t.Errorf("got exit %d, %d bytes out, stderr %q; want 1, 4096 bytes and payload_too_large", code, len(stdout), stderr)
	}
	code, stdout, _ = run(t, nil, "sandbox", "cp", "--max-bytes", "5000", "sbx_a:/workspace/t", "-")
	if code != exitOK || stdout != string(body) {
		t.Errorf("at the bound: got exit %d, %d bytes out; want 0 and the whole stream", code, len(stdout))
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"1", 1, false},
		{"4096", 4096, false},
		{"1K", 1 << 10, false},
		{"20G", 20 << 30, false},
		{"20GiB", 20 << 30, false},
		{"2t", 2 << 40, false},
		{"0", 0, true},
		{"-1", 0, true},
		{"1KB", 0, true},
		{"G", 0, true},
		{"9999999999T", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseSize(%q): got %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{{10 << 30, "10G"}, {3 << 10, "3K"}, {1536, "1536"}, {1000, "1000"}, {1 << 40, "1T"}, {1 << 50, "1024T"}}
	for _, tt := range tests {
		v := sizeValue(tt.n)
		if got := v.String(); got != tt.want {
			t.Errorf("sizeValue(%d): got %q, want %q", tt.n, got, tt.want)
		}
	}
}
