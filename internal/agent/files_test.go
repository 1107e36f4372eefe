package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
)

func q(path string) string { return "?path=" + url.QueryEscape(path) }

func TestResolve(t *testing.T) {
	s := New(Config{Workspace: "/workspace"})
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "relative", in: "a/b.txt", want: "/workspace/a/b.txt"},
		{name: "dot", in: ".", want: "/workspace"},
		{name: "absolute", in: "/etc/hosts", want: "/etc/hosts"},
		{name: "cleaned", in: "/a//b/./c/", want: "/a/b/c"},
		{name: "root", in: "/", want: "/"},
		{name: "empty", in: "", wantErr: "required"},
		{name: "NUL", in: "a\x00b", wantErr: "NUL"},
		{name: "dotdot", in: "../etc/passwd", wantErr: ".."},
		{name: "inner dotdot", in: "a/../../b", wantErr: ".."},
		{name: "absolute dotdot", in: "/workspace/../etc", wantErr: ".."},
		{name: "dotdot at the end", in: "a/..", wantErr: ".."},
		{name: "dots in a name are fine", in: "a..b/...", want: "/workspace/a..b/..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.resolve(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v, want an error about %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestFileRoundTrip(t *testing.T) {
	a := newTestAgent(t)
	ws := a.cfg.Workspace
	body := "hello\x00world\n"

	var info api.FileInfo
	a.doJSON("PUT", "/files"+q("a/b/c.txt")+"&mode=0600", strings.NewReader(body), http.StatusOK, &info)
	if info.Path != ws+"/a/b/c.txt" || info.Name != "c.txt" || info.Type != api.FileTypeFile || info.Size != int64(len(body)) || info.Mode != 0o600 {
		t.Errorf("got %+v, want c.txt, file, %d bytes, mode 0600", info, len(body))
	}

	resp, got := a.do("GET", "/files"+q("a/b/c.txt"), nil)
	if resp.StatusCode != 200 || string(got) != body {
		t.Errorf("got %d %q, want 200 %q", resp.StatusCode, got, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("got Content-Type %q, want application/octet-stream", ct)
	}
	if cl := resp.Header.Get("Content-Length"); cl != "12" {
		t.Errorf("got Content-Length %q, want 12", cl)
	}

	// Overwrite, default mode, absolute path.
	a.doJSON("PUT", "/files"+q(ws+"/a/b/c.txt"), strings.NewReader("two"), http.StatusOK, &info)
	if info.Size != 3 || info.Mode != 0o644 {
		t.Errorf("got %+v, want 3 bytes, mode 0644", info)
	}
	if _, got := a.do("GET", "/files"+q("a/b/c.txt"), nil); string(got) != "two" {
		t.Errorf("got %q, want %q", got, "two")
	}
	left, _ := filepath.Glob(filepath.Join(ws, "a/b/.withruntime-*"))
	if len(left) != 0 {
		t.Errorf("got temporary files %v left behind, want none", left)
	}

	// An empty body makes an empty file.
	a.doJSON("PUT", "/files"+q("empty"), nil, http.StatusOK, &info)
	if info.Size != 0 {
		t.Errorf("got size %d, want 0", info.Size)
	}
}

func TestListStatMkdirRemove(t *testing.T) {
	a := newTestAgent(t)
	ws := a.cfg.Workspace
	a.write("d/b.txt", "bb")
	a.write("d/a.txt", "a")
	if err := os.Symlink("a.txt", filepath.Join(ws, "d/link")); err != nil {
		t.Fatal(err)
	}

	var mk api.FileInfo
	a.doJSON("POST", "/files/mkdir"+q("d/sub/deeper"), nil, http.StatusOK, &mk)
	if mk.Type != api.FileTypeDir || mk.Path != ws+"/d/sub/deeper" {
		t.Errorf("got %+v, want the new directory", mk)
	}
	a.doJSON("POST", "/files/mkdir"+q("d/sub"), nil, http.StatusOK, nil) // exists: fine

	var list api.FileList
	a.doJSON("GET", "/files/list"+q("d"), nil, http.StatusOK, &list)
	var names []string
	for _, e := range list.Entries {
		names = append(names, e.Name+":"+e.Type+":"+e.Target)
	}
	if got, want := strings.Join(names, " "), "a.txt:file: b.txt:file: link:symlink:a.txt sub:dir:"; got != want {
		t.Errorf("got entries %q, want %q", got, want)
	}

	var st api.FileInfo
	a.doJSON("GET", "/files/stat"+q("d/link"), nil, http.StatusOK, &st)
	if st.Type != api.FileTypeSymlink || st.Target != "a.txt" {
		t.Errorf("got %+v, want a symlink to a.txt", st)
	}
	a.doJSON("GET", "/files/stat"+q("d/b.txt"), nil, http.StatusOK, &st)
	if st.Type != api.FileTypeFile || st.Size != 2 {
		t.Errorf("got %+v, want a 2-byte file", st)
	}

	a.doJSON("GET", "/files/list"+q("d/sub/deeper"), nil, http.StatusOK, &list)
	if list.Entries == nil || len(list.Entries) != 0 {
		t.Errorf("got %#v, want an empty, non-null list", list.Entries)
	}

	a.wantError("DELETE", "/files"+q("d"), nil, 409, "conflict")
	a.doJSON("DELETE", "/files"+q("d/link"), nil, http.StatusNoContent, nil)
	if _, err := os.Stat(filepath.Join(ws, "d/a.txt")); err != nil {
		t.Errorf("removing a link removed its target: %v", err)
	}
	a.doJSON("DELETE", "/files"+q("d/sub/deeper"), nil, http.StatusNoContent, nil)
	a.doJSON("DELETE", "/files"+q("d")+"&recursive=true", nil, http.StatusNoContent, nil)
	a.wantError("GET", "/files/stat"+q("d"), nil, 404, "not_found")
}

func TestFileErrors(t *testing.T) {
	a := newTestAgent(t)
	ws := a.cfg.Workspace
	a.write("f", "x")
	a.write("dir/x", "x")
	tests := []struct {
		name, method, path string
		status             int
		code               string
	}{
		{name: "read missing", method: "GET", path: "/files" + q("nope"), status: 404, code: "not_found"},
		{name: "read under a file", method: "GET", path: "/files" + q("f/x"), status: 404, code: "not_found"},
		{name: "read a directory", method: "GET", path: "/files" + q("dir"), status: 409, code: "conflict"},
		{name: "read dotdot", method: "GET", path: "/files" + q("../etc/passwd"), status: 400, code: "invalid_request"},
		{name: "read inner dotdot", method: "GET", path: "/files" + q("dir/../../x"), status: 400, code: "invalid_request"},
		{name: "read NUL", method: "GET", path: "/files?path=f%00x", status: 400, code: "invalid_request"},
		{name: "read no path", method: "GET", path: "/files", status: 400, code: "invalid_request"},
		{name: "write dotdot", method: "PUT", path: "/files" + q("../evil"), status: 400, code: "invalid_request"},
		{name: "write NUL", method: "PUT", path: "/files?path=a%00b", status: 400, code: "invalid_request"},
		{name: "write a directory", method: "PUT", path: "/files" + q("dir"), status: 409, code: "conflict"},
		{name: "write under a file", method: "PUT", path: "/files" + q("f/x"), status: 409, code: "conflict"},
		{name: "write bad mode", method: "PUT", path: "/files" + q("g") + "&mode=999", status: 400, code: "invalid_request"},
		{name: "write mode too big", method: "PUT", path: "/files" + q("g") + "&mode=4755", status: 400, code: "invalid_request"},
		{name: "list a file", method: "GET", path: "/files/list" + q("f"), status: 409, code: "conflict"},
		{name: "list missing", method: "GET", path: "/files/list" + q("nope"), status: 404, code: "not_found"},
		{name: "stat missing", method: "GET", path: "/files/stat" + q("nope"), status: 404, code: "not_found"},
		{name: "stat dotdot", method: "GET", path: "/files/stat" + q(".."), status: 400, code: "invalid_request"},
		{name: "mkdir over a file", method: "POST", path: "/files/mkdir" + q("f"), status: 409, code: "conflict"},
		{name: "mkdir under a file", method: "POST", path: "/files/mkdir" + q("f/sub"), status: 409, code: "conflict"},
		{name: "remove missing", method: "DELETE", path: "/files" + q("nope"), status: 404, code: "not_found"},
		{name: "remove root", method: "DELETE", path: "/files" + q("/") + "&recursive=true", status: 400, code: "invalid_request"},
		{name: "remove workspace", method: "DELETE", path: "/files" + q(ws) + "&recursive=true", status: 400, code: "invalid_request"},
		{name: "remove workspace as dot", method: "DELETE", path: "/files" + q(".") + "&recursive=true", status: 400, code: "invalid_request"},
		{name: "remove bad recursive", method: "DELETE", path: "/files" + q("f") + "&recursive=yes", status: 400, code: "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.method == "PUT" {
				body = strings.NewReader("data")
			}
			a.wantError(tt.method, tt.path, body, tt.status, tt.code)
		})
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "evil")); err == nil {
		t.Errorf("a write with .. made a file outside the workspace")
	}
}

func TestWriteReplacesSymlink(t *testing.T) {
	a := newTestAgent(t)
	outside := t.TempDir()
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, []byte("orig"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(a.cfg.Workspace, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	var info api.FileInfo
	a.doJSON("PUT", "/files"+q("link"), strings.NewReader("new"), http.StatusOK, &info)
	if info.Type != api.FileTypeFile {
		t.Errorf("got type %q, want the link replaced by a file", info.Type)
	}
	if b, _ := os.ReadFile(target); string(b) != "orig" {
		t.Errorf("got %q in the link's target, want it untouched (%q)", b, "orig")
	}
	if b, _ := os.ReadFile(link); string(b) != "new" {
		t.Errorf("got %q at the link's place, want %q", b, "new")
	}
}

func TestWriteTooLarge(t *testing.T) {
	a := newTestAgent(t)
	req := httptest.NewRequest("PUT", "/files"+q("big"), strings.NewReader(""))
	req.ContentLength = api.MaxFileBody + 1
	rec := httptest.NewRecorder()
	a.srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "payload_too_large") {
		t.Errorf("got %d %s, want 413 payload_too_large", rec.Code, rec.Body)
	}
	if _, err := os.Stat(filepath.Join(a.cfg.Workspace, "big")); err == nil {
		t.Errorf("a refused upload made a file")
	}
}

// TestReadProcfs reads files the kernel makes as they are read: procfs
// reports size 0 and refuses to seek to the end, which a length-first
// answer needs, yet the read must carry the content.
func TestReadProcfs(t *testing.T) {
	a := newTestAgent(t)
	for _, p := range []string{"/proc/sys/kernel/random/boot_id", "/proc/self/status"} {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Skipf("cannot read %s here: %v", p, err)
		}
		resp, got := a.do("GET", "/files"+q(p), nil)
		if resp.StatusCode != 200 || len(got) == 0 {
			t.Fatalf("GET %s: got %d %q, want 200 and the content", p, resp.StatusCode, got)
		}
		if p == "/proc/sys/kernel/random/boot_id" && string(got) != string(want) {
			t.Errorf("GET %s: got %q, want %q", p, got, want)
		}
	}
}
