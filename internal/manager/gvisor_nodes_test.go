package manager

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/backend/gvisor"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store/storetest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestSharedCheckpointAcrossNodesWithGvisor: two nodes (two managers, each
// with a gVisor backend of its own data dir) on one store and one shared
// checkpoint dir. A sandbox paused on n1 is resumed on n2 with its file
// and a process's memory, is n2's from then on, and its stop on n2 leaves
// nothing in the shared dir.
func TestSharedCheckpointAcrossNodesWithGvisor(t *testing.T) {
	testenv.RequiresGvisor(t)
	st := storetest.OpenBolt(t)
	shared := t.TempDir()
	node := func(id string) *Manager {
		be, err := gvisor.New(gvisor.Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), SharedCheckpoints: shared})
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(Config{
			Backend: be, Store: st, Node: id, NodeCompat: "same-runsc", SharedCheckpoints: true,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DiskMiB: 256,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	n1, n2 := node("n1"), node("n2")
	ctx := t.Context()
	rec, err := n1.Create(ctx, "acct", "", service.CreateRequest{VCPUs: 1, MemoryMiB: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n2.Stop(ctx, "acct", rec.ID); n1.Stop(ctx, "acct", rec.ID) })
	exec(t, n1, rec.ID, `echo from-n1 > /root/note`)
	exec(t, n1, rec.ID, `setsid sh -c 's=$(cat /proc/sys/kernel/random/uuid); trap "echo \$s > /root/said" USR1; echo $$ > /root/keeper.pid; while :; do sleep 0.1; done' > /dev/null 2>&1 < /dev/null &`)
	const say = `rm -f /root/said; i=0; while [ ! -s /root/keeper.pid ]; do i=$((i+1)); [ $i -le 400 ] || exit 2; sleep 0.05; done; kill -USR1 $(cat /root/keeper.pid); i=0; while [ ! -s /root/said ]; do i=$((i+1)); [ $i -le 400 ] || exit 3; sleep 0.05; done; cat /root/said`
	secret := exec(t, n1, rec.ID, say)

	paused, err := n1.Pause(ctx, "acct", rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cp := paused.Checkpoint; cp == nil || !cp.Shared || cp.Compat != "same-runsc" || len(cp.Digest) <= len("sha256:") || cp.Digest[:7] != "sha256:" {
		t.Fatalf("paused: checkpoint %+v, want shared with n1's compat and the digest of what it saved", cp)
	}
	resumed, err := n2.Resume(ctx, "acct", rec.ID)
	if err != nil {
		t.Fatalf("resume on n2: %v", err)
	}
	if resumed.Node != "n2" || resumed.State != sandbox.StateRunning {
		t.Fatalf("resumed: node %q, %s; want n2, running", resumed.Node, resumed.State)
	}
	if got := exec(t, n2, rec.ID, `cat /root/note`); got != "from-n1\n" {
		t.Errorf("the file on n2: got %q, want %q", got, "from-n1\n")
	}
	if got := exec(t, n2, rec.ID, say); got != secret {
		t.Errorf("the process's secret on n2: got %q, want %q", got, secret)
	}
	if _, err := n1.Agent(ctx, "acct", rec.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("n1's agent of n2's sandbox: got %v, want conflict", err)
	}
	ended, err := n2.Stop(ctx, "acct", rec.ID)
	if err != nil || ended.State != sandbox.StateEnded {
		t.Fatalf("stop on n2: %+v, %v", ended, err)
	}
	if entries, _ := os.ReadDir(shared); len(entries) != 0 {
		t.Errorf("the shared dir holds %d entries after the stop, want none (%s)", len(entries), filepath.Join(shared, entries[0].Name()))
	}
}

// exec runs a shell command in the sandbox through the manager's agent
// transport and returns its stdout; it fails the test unless it exits 0.
func exec(t *testing.T, m *Manager, id, shell string) string {
	t.Helper()
	rt, err := m.Agent(t.Context(), "acct", id)
	if err != nil {
		t.Fatalf("agent of %s: %v", id, err)
	}
	body, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Shell: shell}, User: api.UserRoot})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://sandbox-agent/exec", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("exec %q: %v", shell, err)
	}
	defer resp.Body.Close()
	var out, errOut string
	exit := -1
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("exec event %q: %v", sc.Bytes(), err)
		}
		if ev.Type == api.EventStdout || ev.Type == api.EventStderr {
			s, err := ev.Output()
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == api.EventStdout {
				out += s
			} else {
				errOut += s
			}
		}
		if ev.ExitCode != nil {
			exit = *ev.ExitCode
		}
	}
	if exit != 0 {
		t.Fatalf("exec %q: exit %d, stderr %q", shell, exit, errOut)
	}
	return out
}
