package agent

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// TestUserRoot runs commands and makes files as root where the sandbox
// user is someone else, as in a sandbox.
func TestUserRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	const uid, gid = 4321, 4322
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.UID, cfg.GID = uid, gid
	cfg.Workspace = filepath.Join(base, "ws")
	if err := os.Mkdir(cfg.Workspace, 0o777); err != nil {
		t.Fatal(err)
	}
	s := New(cfg)
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	a := &testAgent{t: t, srv: s, url: ts.URL, cfg: cfg}

	const show = `echo "$(id -u) $(id -g) $HOME $USER $LOGNAME"`
	tests := []struct {
		user, want string
	}{
		{"", "4321 4322 /home/user user user\n"},
		{"user", "4321 4322 /home/user user user\n"},
		{"root", "0 0 /root root root\n"},
	}
	for _, tt := range tests {
		res := a.run(api.ExecRequest{Cmd: sh(show), User: tt.user})
		if res.stdout != tt.want || res.code() != 0 {
			t.Errorf("user %q: got %q (exit %d, stderr %q), want %q", tt.user, res.stdout, res.code(), res.stderr, tt.want)
		}
	}
	p := a.background(api.ExecRequest{Cmd: sh("id -u"), User: "root"})
	if got := a.process(p.Pid, "?wait=true"); got.Stdout != "0\n" || got.User != "root" || got.Cwd != cfg.Workspace {
		t.Errorf("got %+v, want root's background process in the workspace", got)
	}

	a.doJSON("PUT", "/files"+q("r/new/f")+"&user=root", strings.NewReader("x"), http.StatusOK, nil)
	a.doJSON("POST", "/files/mkdir"+q("r/dir")+"&user=root", nil, http.StatusOK, nil)
	a.doJSON("PUT", "/files"+q("u/f")+"&user=user", strings.NewReader("x"), http.StatusOK, nil)
	type owner struct{ uid, gid uint32 }
	owners := map[string]owner{"r": {}, "r/new": {}, "r/new/f": {}, "r/dir": {}, "u": {uid, gid}, "u/f": {uid, gid}}
	for p, want := range owners {
		fi, err := os.Lstat(filepath.Join(cfg.Workspace, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != want.uid || st.Gid != want.gid {
			t.Errorf("%s: got owner %d:%d, want %d:%d", p, st.Uid, st.Gid, want.uid, want.gid)
		}
	}
	for _, path := range []string{"/files" + q("f"), "/files/list" + q("."), "/files/stat" + q("r")} {
		a.wantError("GET", path+"&user=admin", nil, http.StatusBadRequest, "invalid_request")
	}
	a.doJSON("GET", "/files/stat"+q("r")+"&user=root", nil, http.StatusOK, nil)
}
