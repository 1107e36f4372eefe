package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestRestart: a server that dies and comes back finds its sandboxes of
// either isolation as they were (a running one usable, with its code
// interpreter's state; a paused one resumable), ends the one whose process
// died while it was away (host_restart) and the one whose lease ran out,
// and leaves nothing behind once they are stopped.
func TestRestart(t *testing.T) { forIsolations(t, testRestart) }

func testRestart(t *testing.T, isolation string, flags ...string) {
	s := testenv.StartServer(t, append([]string{"--isolation", isolation}, flags...)...)
	c := newClient(t, s, s.Key)
	create := func(body string) api.Sandbox {
		t.Helper()
		status, data := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(body))
		var sb api.Sandbox
		if status != 201 || json.Unmarshal(data, &sb) != nil {
			t.Fatalf("create: %d %s", status, data)
		}
		return sb
	}
	exec := func(id, cmd string) (int, string) {
		t.Helper()
		status, data := call(t, s, s.Key, "POST", "/v1/sandboxes/"+id+"/exec", strings.NewReader(`{"cmd":`+strconv.Quote(cmd)+`}`))
		return status, string(data)
	}
	kept := create(`{"vcpus":1,"memory_mib":1024}`)
	lost := create(`{"vcpus":1,"memory_mib":1024}`)
	paused := create(`{"vcpus":1,"memory_mib":1024}`)
	expiring := create(`{"vcpus":1,"memory_mib":512,"timeout_seconds":1}`)
	ids := []string{kept.ID, lost.ID, paused.ID, expiring.ID}
	if st, out := exec(kept.ID, "echo survived > /workspace/f"); st != 200 {
		t.Fatalf("exec: %d %s", st, out)
	}
	// A kernel of the code interpreter, started before the restart.
	if ex, err := c.RunCode(t.Context(), kept.ID, api.CodeRequest{Code: "x = 40\nx", TimeoutMs: 240_000}, client.CodeOptions{}); err != nil || ex.Error != nil || ex.Text() != "40" {
		t.Fatalf("run_code before the restart: %+v %v", ex, err)
	}
	if st, data := call(t, s, s.Key, "POST", "/v1/sandboxes/"+paused.ID+"/pause", nil); st != 200 {
		t.Fatalf("pause: %d %s", st, data)
	}

	// The server dies mid-flight; one sandbox dies while it is away.
	s.Stop(true)
	pid, _ := os.ReadFile(pidFile(s.DataDir, isolation, lost.ID))
	if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
		syscall.Kill(n, syscall.SIGKILL)
	} else {
		t.Fatalf("reading the pid of %s: %v", lost.ID, err)
	}
	// The short lease runs out while no server is there to end it.
	time.Sleep(1500 * time.Millisecond)
	s.Start()

	get := func(id string) api.Sandbox {
		_, data := call(t, s, s.Key, "GET", "/v1/sandboxes/"+id, nil)
		var sb api.Sandbox
		json.Unmarshal(data, &sb)
		return sb
	}
	if sb := get(kept.ID); sb.State != "running" || sb.Isolation != isolation {
		t.Fatalf("kept sandbox after restart: %+v, want running %s", sb, isolation)
	}
	if st, out := exec(kept.ID, "cat /workspace/f"); st != 200 || !strings.Contains(out, "survived") {
		t.Fatalf("kept sandbox is not usable: %d %s", st, out)
	}
	if ex, err := c.RunCode(t.Context(), kept.ID, api.CodeRequest{Code: "x + 2"}, client.CodeOptions{}); err != nil || ex.Error != nil || ex.Text() != "42" {
		t.Fatalf("run_code after the restart: %+v %v, want 42 from the same kernel", ex, err)
	}
	if sb := get(lost.ID); sb.State != "ended" || sb.EndReason != "host_restart" {
		t.Fatalf("lost sandbox after restart: got %s/%s, want ended/host_restart", sb.State, sb.EndReason)
	}
	deadline := time.Now().Add(5 * time.Second)
	for get(expiring.ID).State != "ended" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if sb := get(expiring.ID); sb.State != "ended" || sb.EndReason != "lease_ended" {
		t.Fatalf("a lease that ran out during the restart: got %s/%s, want ended/lease_ended", sb.State, sb.EndReason)
	}
	if sb := get(paused.ID); sb.State != "paused" {
		t.Fatalf("paused sandbox after restart: %+v", sb)
	}
	if st, data := call(t, s, s.Key, "POST", "/v1/sandboxes/"+paused.ID+"/resume", nil); st != 200 {
		t.Fatalf("resume after restart: %d %s", st, data)
	}
	for _, id := range ids {
		call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+id, nil)
	}
	if got := leftovers(t, s.DataDir, ids); len(got) > 0 {
		t.Fatalf("left behind after restart and stop: %v", got)
	}
}

func TestStoppedServerLeavesNoPacketRules(t *testing.T) {
	s := testenv.StartServer(t)
	status, data := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":512,"network":{"internet":true,"allow":["a.example.test"]}}`))
	var sb api.Sandbox
	if status != 201 || json.Unmarshal(data, &sb) != nil {
		t.Fatalf("create: %d %s", status, data)
	}
	abs, _ := filepath.Abs(s.DataDir)
	sum := sha256.Sum256([]byte(abs))
	table := "withruntime_" + hex.EncodeToString(sum[:])[:3]
	tables := func() string {
		out, err := exec.Command("nft", "list", "tables").CombinedOutput()
		if err != nil {
			t.Fatalf("nft: %v %s", err, out)
		}
		return string(out)
	}
	if !strings.Contains(tables(), table) {
		t.Fatalf("no table %s while a sandbox runs:\n%s", table, tables())
	}
	call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+sb.ID, nil)
	s.Stop(false)
	if strings.Contains(tables(), table) {
		t.Fatalf("table %s is still there after the server stopped with no sandbox", table)
	}
	if got := leftovers(t, s.DataDir, []string{sb.ID}); len(got) > 0 {
		t.Fatalf("left behind: %v", got)
	}
}
