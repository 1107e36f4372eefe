package cli

import (
	"bytes"
	"errors"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCpSide(t *testing.T) {
	tests := []struct {
		arg      string
		id, path string
	}{
		{"sbx_1:/etc/hosts", "sbx_1", "/etc/hosts"},
		{"sbx_1:src", "sbx_1", "src"},
		{"sbx_1:", "sbx_1", "."},           // the workspace
		{"sbx_1:a:b", "sbx_1", "a:b"},      // only the first colon splits
		{"./a:b", "", "./a:b"},             // a local name with a colon
		{"/tmp/a:b", "", "/tmp/a:b"},       // absolute: local
		{"dir/sbx_1:x", "", "dir/sbx_1:x"}, // a slash before the colon: local
		{"local.txt", "", "local.txt"},
		{":x", "", ":x"}, // no id
		{"-", "", "-"},
	}
	for _, tt := range tests {
		got, err := parseCpSide(tt.arg)
		if err != nil {
			t.Errorf("parseCpSide(%q): %v", tt.arg, err)
			continue
		}
		if got.id != tt.id || got.path != tt.path {
			t.Errorf("parseCpSide(%q) = {%q %q}, want {%q %q}", tt.arg, got.id, got.path, tt.id, tt.path)
		}
	}
}

func TestParseCpArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"upload", []string{"a.txt", "sbx_1:b.txt"}, ""},
		{"download", []string{"sbx_1:b.txt", "a.txt"}, ""},
		{"stream in", []string{"-", "sbx_1:d"}, ""},
		{"stream out", []string{"sbx_1:d", "-"}, ""},
		{"both local", []string{"a", "b"}, "both sides are local"},
		{"both remote", []string{"sbx_1:a", "sbx_2:b"}, "both sides are in a sandbox"},
		{"stream both", []string{"-", "-"}, "both sides are local"},
		{"one argument", []string{"sbx_1:a"}, "want SRC and DST, got 1"},
		{"none", nil, "want SRC and DST, got 0"},
		{"three", []string{"a", "b", "sbx_1:c"}, "got 3"},
		{"empty", []string{"", "sbx_1:c"}, "SRC: empty path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseCpArgs(tt.args)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

func TestCpTarget(t *testing.T) {
	dir := cpSpec{name: "src", dir: true}
	contents := cpSpec{name: "src", dir: true, contents: true}
	file := cpSpec{name: "f.txt"}
	tests := []struct {
		name     string
		src      cpSpec
		dst      string
		kind     cpKind
		want     string
		wantCode string
	}{
		{"dir onto existing dir lands inside", dir, "dst", cpDir, "dst/src", ""},
		{"dir onto missing path becomes it", dir, "dst", cpMissing, "dst", ""},
		{"dir onto missing path with slash", dir, "dst/", cpMissing, "dst/", ""},
		{"dir onto a file", dir, "dst", cpFile, "", "conflict"},
		{"contents onto existing dir", contents, "dst", cpDir, "dst", ""},
		{"contents onto missing path", contents, "dst", cpMissing, "dst", ""},
		{"root onto existing dir", cpSpec{name: "/", dir: true}, "dst", cpDir, "dst", ""},
		{"file onto existing dir lands inside", file, "dst", cpDir, "dst/f.txt", ""},
		{"file onto existing dir with slash", file, "dst/", cpDir, "dst/f.txt", ""},
		{"file onto a file replaces it", file, "g.txt", cpFile, "g.txt", ""},
		{"file onto a missing path becomes it", file, "g.txt", cpMissing, "g.txt", ""},
		{"file onto a missing dir", file, "nodir/", cpMissing, "", "not_found"},
		{"file onto a file with slash", file, "g.txt/", cpFile, "", "conflict"},
		{"file with /.", cpSpec{name: "f.txt", contents: true}, "dst", cpDir, "", "conflict"},
	}
	for _, tt := range tests {
		for _, join := range []struct {
			side string
			fn   func(...string) string
		}{{"sandbox", path.Join}, {"local", filepath.Join}} {
			t.Run(tt.name+"/"+join.side, func(t *testing.T) {
				got, err := cpTarget(tt.src, tt.dst, tt.kind, join.fn)
				if tt.wantCode != "" {
					var ce *cliError
					if !errors.As(err, &ce) || ce.code != tt.wantCode {
						t.Fatalf("got %q, %v, want a %s error", got, err, tt.wantCode)
					}
					return
				}
				if err != nil || got != tt.want {
					t.Fatalf("got %q, %v, want %q", got, err, tt.want)
				}
			})
		}
	}
}

func TestEndsInDot(t *testing.T) {
	for p, want := range map[string]bool{".": true, "a/.": true, "/a/b/.": true, "a": false, "a/": false, ".a": false, "a/..": false} {
		if got := endsInDot(p); got != want {
			t.Errorf("endsInDot(%q) = %v, want %v", p, got, want)
		}
	}
}

// Usage errors stop before any server is needed: the App has no daemon and
// WITHRUNTIME_BASE_URL points nowhere.
func TestCpUsageErrors(t *testing.T) {
	t.Setenv("WITHRUNTIME_BASE_URL", "http://127.0.0.1:1")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no arguments", nil, "want SRC and DST, got 0 arguments"},
		{"one argument", []string{"sbx_1:a"}, "want SRC and DST, got 1 arguments"},
		{"both local", []string{"a", "b"}, "both sides are local"},
		{"both remote", []string{"sbx_1:a", "sbx_2:b"}, "both sides are in a sandbox"},
		{"unknown flag", []string{"--nope", "a", "sbx_1:b"}, "usage: withruntime sandbox cp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(append([]string{"sandbox", "cp"}, tt.args...), strings.NewReader(""), &out, &errb)
			if code != exitUsage {
				t.Errorf("got exit %d, want %d (stderr %q)", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) || !strings.Contains(errb.String(), "usage: withruntime sandbox cp") {
				t.Errorf("got stderr %q, want %q and the usage line", errb.String(), tt.want)
			}
		})
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"sandbox", "cp", "--help"}, strings.NewReader(""), &out, &errb); code != exitOK || !strings.Contains(out.String(), "like\ndocker cp") {
		t.Errorf("--help: got exit %d, stdout %q", code, out.String())
	}
}
