package agent

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// TestUserRoot runs commands and makes files as root where the sandbox
// user is someone else, as in a sandbox.
func TestUserRoot(t *testing.T) {
	cfg, _ := asUserConfig(t)
	if err := os.Mkdir(cfg.Workspace, 0o777); err != nil {
		t.Fatal(err)
	}
	// Past the umask: the user makes files here as itself.
	if err := os.Chmod(cfg.Workspace, 0o777); err != nil {
		t.Fatal(err)
	}
	a := serveAgent(t, cfg, nil)

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
	owners := map[string]owner{"r": {}, "r/new": {}, "r/new/f": {}, "r/dir": {}, "u": {testUID, testGID}, "u/f": {testUID, testGID}}
	for p, want := range owners {
		a.wantOwner(p, want.uid, want.gid)
	}
	for _, path := range []string{"/files" + q("f"), "/files/list" + q("."), "/files/stat" + q("r")} {
		a.wantError("GET", path+"&user=admin", nil, http.StatusBadRequest, "invalid_request")
	}
	a.doJSON("GET", "/files/stat"+q("r")+"&user=root", nil, http.StatusOK, nil)
}
