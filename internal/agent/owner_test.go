package agent

import (
	"archive/tar"
	"bytes"
	"net/http"
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
	cfg, _ := asUserConfig(t)
	if err := os.Mkdir(cfg.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(cfg.Workspace, testUID, testGID); err != nil {
		t.Fatal(err)
	}
	a := serveAgent(t, cfg, nil)

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
		a.wantOwner(p, testUID, testGID)
	}

	// Root overwriting a file keeps its owner.
	a.doJSON("PUT", "/files"+q("new/dir/f")+"&user=root", strings.NewReader("by root"), http.StatusOK, nil)
	a.wantOwner("new/dir/f", testUID, testGID)

	// The user may not overwrite root's file it may not write (the files
	// API acts as the user), and root's file is left as it was.
	root := filepath.Join(cfg.Workspace, "rootfile")
	if err := os.WriteFile(root, []byte("r"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.wantError("PUT", "/files"+q("rootfile"), strings.NewReader("new"), http.StatusForbidden, "forbidden")
	if b, err := os.ReadFile(root); err != nil || string(b) != "r" {
		t.Errorf("rootfile: got %q, %v, want %q left", b, err, "r")
	}
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
		t.Errorf("got owner %d after a refused overwrite, want 0 kept", st.Uid)
	}
	// One it may write it replaces, and the new file is the user's: a user
	// cannot give a file away.
	shared := filepath.Join(cfg.Workspace, "shared")
	if err := os.WriteFile(shared, []byte("r"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o666); err != nil {
		t.Fatal(err)
	}
	a.doJSON("PUT", "/files"+q("shared"), strings.NewReader("new"), http.StatusOK, nil)
	a.wantOwner("shared", testUID, testGID)
}
