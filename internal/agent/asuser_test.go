package agent

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// testUID and testGID are the sandbox user the root-only tests switch to.
const testUID, testGID = 4321, 4322

// asUserConfig returns a config running as testUID:testGID with its
// workspace at base/ws (not made yet), and base, a temporary directory that
// user can reach. It skips the test unless it runs as root.
func asUserConfig(t *testing.T) (Config, string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	base := t.TempDir()
	// The user must be able to reach the workspace.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.UID, cfg.GID = testUID, testGID
	cfg.Workspace = filepath.Join(base, "ws")
	return cfg, base
}

// serveAgent serves an agent for cfg on loopback, closed with the test;
// setup, when not nil, adjusts the server before it serves.
func serveAgent(t *testing.T, cfg Config, setup func(*Server)) *testAgent {
	t.Helper()
	s := New(cfg)
	if setup != nil {
		setup(s)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	return &testAgent{t: t, srv: s, url: ts.URL, cfg: cfg}
}

// wantOwner fails the test unless rel, in the workspace and not followed
// if a symlink, is owned by uid:gid.
func (a *testAgent) wantOwner(rel string, uid, gid uint32) {
	a.t.Helper()
	fi, err := os.Lstat(filepath.Join(a.cfg.Workspace, rel))
	if err != nil {
		a.t.Errorf("%s: %v", rel, err)
		return
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
		a.t.Errorf("%s: got owner %d:%d, want %d:%d", rel, st.Uid, st.Gid, uid, gid)
	}
}
