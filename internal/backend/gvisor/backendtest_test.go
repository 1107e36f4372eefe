package gvisor

import (
	"testing"

	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/sandbox/backendtest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestBackendSuite runs the backend suite against gVisor: every case,
// real sandboxes, a fresh data dir each; once with checkpoints kept in the
// data dir and once in a shared checkpoint dir (where the digest of a
// pause is checked on resume). Attach is tried on a second backend over
// the same dirs, as a restarted server opens them.
func TestBackendSuite(t *testing.T) {
	testenv.RequiresGvisor(t)
	for _, shared := range []bool{false, true} {
		name := "gvisor"
		if shared {
			name += "+shared"
		}
		t.Run(name, func(t *testing.T) {
			var cfg Config
			open := func(t *testing.T) *Backend {
				b, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				// Registered before the suite's own cleanups, so run
				// after them: with its sandboxes destroyed, Close
				// removes the run dir.
				t.Cleanup(func() { b.Close() })
				return b
			}
			backendtest.Run(t, name, func(t *testing.T) sandbox.Backend {
				cfg = Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir()}
				if shared {
					cfg.SharedCheckpoints = t.TempDir()
				}
				return open(t)
			}, backendtest.Options{
				Spec: sandbox.Spec{Image: image.DefaultName, VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256},
				Reopen: func(t *testing.T, old sandbox.Backend) sandbox.Backend {
					// The old server's end: its agent links close, so
					// that the agents dial the new backend's listeners,
					// and it forgets its instances (a link's directory
					// is a raw descriptor: closed twice, the second
					// close would hit whatever reused its number).
					o := old.(*Backend)
					o.mu.Lock()
					for id, inst := range o.instances {
						inst.link.close()
						delete(o.instances, id)
					}
					o.mu.Unlock()
					return open(t)
				},
				Networked: func(t *testing.T) sandbox.Backend {
					b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), Egress: backendtest.Egress(t, "g")})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { b.Close() })
					return b
				},
				Shell: backendtest.AgentShell,
				Slow:  true,
			})
		})
	}
}
