package microvm

import (
	"os"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/sandbox/backendtest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestBackendSuite runs the backend suite against microVMs under TCG
// (this host's KVM boots no stock kernel), a fresh data dir each. Every
// boot there takes seconds, so the cases the suite marks slow run only
// with WITHRUNTIME_BACKENDTEST_SLOW=1; the fast ones still boot, attach,
// freeze, meter and sweep a real VM. Attach is tried on a second backend
// over the same data dir, as a restarted server opens it.
func TestBackendSuite(t *testing.T) {
	testenv.RequiresMicroVM(t)
	var dataDir string
	open := func(t *testing.T) *Backend {
		b, err := New(Config{DataDir: dataDir, CacheDir: testenv.CacheDir(), Accel: "tcg"})
		if err != nil {
			t.Fatal(err)
		}
		// Registered before the suite's own cleanups, so run after them:
		// with its sandboxes destroyed, Close removes the run dir.
		t.Cleanup(func() { b.Close() })
		return b
	}
	backendtest.Run(t, "microvm", func(t *testing.T) sandbox.Backend {
		dataDir = t.TempDir()
		return open(t)
	}, backendtest.Options{
		Spec: testSpec(),
		Reopen: func(t *testing.T, old sandbox.Backend) sandbox.Backend {
			// The old server's end: its monitor and agent connections
			// close, QEMU runs on, and it forgets its instances.
			o := old.(*Backend)
			o.mu.Lock()
			for id, inst := range o.instances {
				inst.close()
				delete(o.instances, id)
			}
			o.mu.Unlock()
			return open(t)
		},
		Networked: func(t *testing.T) sandbox.Backend {
			b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), Accel: "tcg", Egress: backendtest.Egress(t, "m")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		},
		Shell:      backendtest.AgentShell,
		Slow:       os.Getenv("WITHRUNTIME_BACKENDTEST_SLOW") != "",
		SlowReason: "a slow case under TCG: run with WITHRUNTIME_BACKENDTEST_SLOW=1",
		Wait:       90 * time.Second,
	})
}
