// Package conformance is one suite that every registered isolation backend
// must pass, run through the real server and the Go client: lifecycle,
// exec, files, background processes, leases, pause and resume, isolation.
package conformance

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/server"
	"github.com/withruntime/withruntime/internal/testenv"
)

// env is one backend's server and a client of it.
type env struct {
	backend string
	srv     *server.Server
	c       *client.Client
}

var (
	envsMu sync.Mutex // guards envs
	envs   = map[string]*env{}
)

// TestMain stops every server the suite started, with its sandboxes.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, e := range envs {
		ctx := context.Background()
		if list, err := e.c.ListSandboxes(ctx); err == nil {
			for _, s := range list {
				if s.State != string(sandbox.StateEnded) {
					e.c.StopSandbox(ctx, s.ID)
				}
			}
		}
		e.srv.Close()
		os.RemoveAll(e.srv.DataDir())
	}
	os.Exit(code)
}

// forEachBackend runs f against every registered backend, cold and with
// a warm pool of the suite's usual size (so that most of its creates are
// claims), each with one server shared by the whole suite.
func forEachBackend(t *testing.T, f func(t *testing.T, e *env)) {
	testenv.RequiresGvisor(t)
	for _, name := range sandbox.Backends() {
		if name == "microvm" {
			testenv.RequiresMicroVM(t)
		}
		for _, pooled := range []bool{false, true} {
			if pooled && name == "microvm" {
				// The whole suite again from a pool of TCG VMs would
				// double its time; microVM pool members are checked by
				// e2e's TestPoolMicroVM and the backend's own
				// TestWarmStartAndClaim.
				continue
			}
			label := name
			if pooled {
				label += "+pool"
			}
			t.Run(label, func(t *testing.T) {
				f(t, backendEnv(t, name, pooled))
			})
		}
	}
}

// suitePool is the warm pool of the pooled servers: the size of small().
var suitePool = []manager.Pool{{VCPUs: 1, MemoryMiB: 1024, Size: 2}}

func backendEnv(t *testing.T, name string, pooled bool) *env {
	envsMu.Lock()
	defer envsMu.Unlock()
	key := name
	var pools []manager.Pool
	if pooled {
		key, pools = name+"+pool", suitePool
	}
	if e := envs[key]; e != nil {
		return e
	}
	dir, err := os.MkdirTemp("", "withruntime-conformance-")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(context.Background(), server.Config{
		Listen:   "127.0.0.1:0",
		DataDir:  dir,
		CacheDir: testenv.CacheDir(),
		Backend:  name,
		// This host's KVM boots no stock kernel: microVMs run under TCG.
		BackendOptions: map[string]string{"microvm-accel": "tcg"},
		Quiet:          true,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		Manager:        manager.Config{ReapInterval: 200 * time.Millisecond, DiskMiB: diskMiB, Pools: pools},
	})
	if err != nil {
		t.Fatalf("starting server with backend %s: %v", name, err)
	}
	c, err := client.New(client.WithBaseURL(srv.URL), client.WithAPIKey(srv.AdminKey))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{backend: name, srv: srv, c: c}
	envs[key] = e
	return e
}

// diskMiB is the size of each sandbox's writable layer in the suite.
const diskMiB = 256

// small is the size most tests use, so several fit on a 2-core host.
func small() api.CreateSandboxRequest {
	return api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 1024, TimeoutSeconds: 600}
}

// create makes a sandbox that is stopped when the test ends.
func (e *env) create(t *testing.T, req api.CreateSandboxRequest) *api.Sandbox {
	t.Helper()
	sb, err := e.c.CreateSandbox(t.Context(), req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { e.c.StopSandbox(context.Background(), sb.ID) })
	return sb
}

// sh runs a shell command and returns its result, failing the test on a
// platform error.
func (e *env) sh(t *testing.T, id, cmd string) *client.ExecResult {
	t.Helper()
	res, err := e.c.Exec(t.Context(), id, api.ExecRequest{Cmd: api.Command{Shell: cmd}}, client.ExecOptions{})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return res
}

// out runs a shell command that must succeed and returns its trimmed
// stdout.
func (e *env) out(t *testing.T, id, cmd string) string {
	t.Helper()
	res := e.sh(t, id, cmd)
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d, stderr %q", cmd, res.ExitCode, res.Stderr)
	}
	return strings.TrimSpace(res.Stdout)
}

// lease is a lease of seconds long enough for the test's few commands:
// microVMs run under TCG here, where a command takes a second.
func (e *env) lease(seconds int) int {
	if e.backend == "microvm" {
		return seconds * 5
	}
	return seconds
}

// waitState polls until the sandbox reaches state or the time runs out.
func (e *env) waitState(t *testing.T, id string, state sandbox.State, limit time.Duration) *api.Sandbox {
	t.Helper()
	if e.backend == "microvm" {
		limit *= 6 // TCG: software emulation
	}
	deadline := time.Now().Add(limit)
	for {
		sb, err := e.c.GetSandbox(t.Context(), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if sb.State == string(state) {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: got state %s after %s, want %s", id, sb.State, limit, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
