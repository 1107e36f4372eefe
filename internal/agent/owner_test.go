package agent

import (
	"archive/tar"
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// TestOwnership runs commands and makes files as another user, as the agent
// does in a sandbox.
func TestOwnership(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	const uid, gid = 4321, 4322
	base := t.TempDir()
	// The user must be able to reach the workspace.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.UID, cfg.GID = uid, gid
	cfg.Workspace = filepath.Join(base, "ws")
	if err := os.Mkdir(cfg.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(cfg.Workspace, uid, gid); err != nil {
		t.Fatal(err)
	}
	s := New(cfg)
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	a := &testAgent{t: t, srv: s, url: ts.URL, cfg: cfg}

	res := a.run(api.ExecRequest{Cmd: sh("id -u; id -g; id -G; touch made-by-cmd")})
	if got, want := res.stdout, "4321\n4322\n4322\n"; got != want || res.code() != 0 {
		t.Errorf("got %q (exit %d, stderr %q), want %q: no supplementary groups", got, res.code(), res.stderr, want)
	}

	a.doJSON("PUT", "/files"+q("new/dir/f"), strings.NewReader("x"), http.StatusOK, nil)
	a.doJSON("POST", "/files/mkdir"+q("made/here"), nil, http.StatusOK, nil)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "x/y", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("y"))
	tw.WriteHeader(&tar.Header{Name: "l", Linkname: "x/y", Typeflag: tar.TypeSymlink})
	tw.Close()
	a.doJSON("PUT", "/archive"+q("ar"), &buf, http.StatusOK, nil)

	for _, p := range []string{"made-by-cmd", "new", "new/dir", "new/dir/f", "made", "made/here", "ar", "ar/x", "ar/x/y", "ar/l"} {
		fi, err := os.Lstat(filepath.Join(cfg.Workspace, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("%s: got owner %d:%d, want %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
	}

	// Overwriting a file keeps its owner.
	root := filepath.Join(cfg.Workspace, "rootfile")
	if err := os.WriteFile(root, []byte("r"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.doJSON("PUT", "/files"+q("rootfile"), strings.NewReader("new"), http.StatusOK, nil)
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
		t.Errorf("got owner %d after an overwrite, want 0 kept", st.Uid)
	}
}
