package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestFork forks a sandbox twice over (forkAndCheck). Then the server dies in the middle of a fork of four and
// comes back: every fork it recorded running answers, the rest are ended,
// no snapshot is left that no record names, and nothing of any of them
// stays on the host once they are stopped.
func TestFork(t *testing.T) {
	s := testenv.StartServer(t)
	c := newClient(t, s, s.Key)
	src, run := forkAndCheck(t, s, c, `{"vcpus":1,"memory_mib":1024}`, 2)

	// The server dies while a fork of four is under way.
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Its answer never comes: the server dies first.
		req, _ := http.NewRequest("POST", s.URL+"/v1/sandboxes/"+src.ID+"/fork", strings.NewReader(`{"count":4,"keep_snapshot":true}`))
		req.Header.Set("Authorization", "Bearer "+s.Key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	// Killed once the first of the four has a record: the others are
	// being made.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_, data := call(t, s, s.Key, "GET", "/v1/sandboxes", nil)
		var l api.SandboxList
		if json.Unmarshal(data, &l) == nil && len(l.Sandboxes) > 3 {
			break
		}
	}
	s.Stop(true)
	<-done
	s.Start()
	_, data := call(t, s, s.Key, "GET", "/v1/sandboxes", nil)
	var list api.SandboxList
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("list: %v %s", err, data)
	}
	var ids []string
	for _, sb := range list.Sandboxes {
		ids = append(ids, sb.ID)
		switch sb.State {
		case "running":
			if out := run(sb.ID, "echo alive"); out != "alive\n" {
				t.Fatalf("%s after the restart: %q", sb.ID, out)
			}
		case "ended":
		default:
			t.Fatalf("%s after a restart mid-fork: %s", sb.ID, sb.State)
		}
	}
	t.Logf("after the restart mid-fork: %d sandboxes", len(list.Sandboxes))
	_, data = call(t, s, s.Key, "GET", "/v1/snapshots", nil)
	var snaps api.SnapshotList
	json.Unmarshal(data, &snaps)
	recorded := map[string]bool{}
	for _, sn := range snaps.Snapshots {
		recorded[sn.ID] = true
	}
	entries, _ := os.ReadDir(filepath.Join(s.DataDir, "snapshots"))
	for _, e := range entries {
		if !recorded[e.Name()] {
			t.Fatalf("snapshot dir %s is left with no record (recorded: %v)", e.Name(), recorded)
		}
	}
	for id := range recorded {
		if st, data := call(t, s, s.Key, "DELETE", "/v1/snapshots/"+id, nil); st != 204 {
			t.Fatalf("removing snapshot %s: %d %s", id, st, data)
		}
	}
	for _, id := range ids {
		call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+id, nil)
	}
	if got := leftovers(t, s.DataDir, ids); len(got) > 0 {
		t.Fatalf("left behind: %v", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.DataDir, "snapshots")); len(entries) != 0 {
		t.Fatalf("snapshot dirs left after their removal: %d", len(entries))
	}
}

// forkAndCheck creates a sandbox from body whose Python kernel holds a
// variable and whose server serves a file, and forks it n times: each fork
// goes on with both, writes files of its own, and has its own boot id and
// kernel randomness; the source runs on unchanged, and a command whose
// output streams through the fork ends whole. It returns the source
// and a function that runs a shell command in a sandbox.
func forkAndCheck(t *testing.T, s *testenv.Server, c *client.Client, body string, n int) (api.Sandbox, func(id, cmd string) string) {
	t.Helper()
	ctx := t.Context()
	status, data := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(body))
	var src api.Sandbox
	if status != 201 || json.Unmarshal(data, &src) != nil {
		t.Fatalf("create: %d %s", status, data)
	}
	run := func(id, cmd string) string {
		t.Helper()
		res, err := c.Exec(ctx, id, api.ExecRequest{Cmd: api.Command{Shell: cmd}, TimeoutMs: 60_000}, client.ExecOptions{})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %q in %s: %+v %v", cmd, id, res, err)
		}
		return res.Stdout
	}
	if ex, err := c.RunCode(ctx, src.ID, api.CodeRequest{Code: "x = 40\nx"}, client.CodeOptions{}); err != nil || ex.Error != nil || ex.Text() != "40" {
		t.Fatalf("run_code in the source: %+v %v", ex, err)
	}
	run(src.ID, "mkdir -p /workspace/site && echo served-by-source > /workspace/site/index.txt")
	status, data = call(t, s, s.Key, "POST", "/v1/sandboxes/"+src.ID+"/exec", strings.NewReader(`{"cmd":"cd /workspace/site && exec python3 -m http.server 8000","background":true}`))
	if status != 201 {
		t.Fatalf("starting the server: %d %s", status, data)
	}
	page := func(id string) (int, string) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			status, data := call(t, s, s.Key, "GET", "/v1/sandboxes/"+id+"/ports/8000/index.txt", nil)
			if status == 200 || time.Now().After(deadline) {
				return status, string(data)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if st, body := page(src.ID); st != 200 || body != "served-by-source\n" {
		t.Fatalf("the source's server: %d %q", st, body)
	}

	// A command that streams through the fork: the snapshot suspends the
	// agent's link for a moment, and the stream is followed on, whole.
	type result struct {
		res *client.ExecResult
		err error
	}
	through := make(chan result, 1)
	go func() {
		res, err := c.Exec(ctx, src.ID, api.ExecRequest{Cmd: api.Command{Shell: "echo before; while [ ! -e /tmp/go-on ]; do sleep 0.05; done; echo after; exit 7"}, TimeoutMs: 120_000}, client.ExecOptions{})
		through <- result{res, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(run(src.ID, "ps -eo args"), "while [ ! -e /tmp/go-on ]"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the streaming command did not start")
		}
	}

	// Linux makes its boot id at the first read: one read before the fork
	// is in the forks' memory.
	bootBefore := run(src.ID, "cat /proc/sys/kernel/random/boot_id")
	began := time.Now()
	status, data = call(t, s, s.Key, "POST", "/v1/sandboxes/"+src.ID+"/fork", strings.NewReader(fmt.Sprintf(`{"count":%d}`, n)))
	t.Logf("fork of %d: %s", n, time.Since(began))
	var fork api.ForkResult
	if status != 201 || json.Unmarshal(data, &fork) != nil || len(fork.Sandboxes) != n || fork.Snapshot != nil {
		t.Fatalf("fork: %d %s", status, data)
	}
	run(src.ID, "touch /tmp/go-on")
	if r := <-through; r.err != nil || r.res.ExitCode != 7 || r.res.Stdout != "before\nafter\n" {
		t.Fatalf("a command streaming through the fork: %+v %v, want exit 7 and both lines once", r.res, r.err)
	}
	boots := map[string]string{run(src.ID, "cat /proc/sys/kernel/random/boot_id"): src.ID}
	if _, same := boots[bootBefore]; !same {
		t.Fatalf("the source's boot id changed with the fork")
	}
	rands := map[string]string{run(src.ID, "head -c 16 /dev/urandom | od -An -tx1"): src.ID}
	for _, f := range fork.Sandboxes {
		if f.ID == src.ID || f.State != "running" {
			t.Fatalf("a fork: %+v", f)
		}
		if ex, err := c.RunCode(ctx, f.ID, api.CodeRequest{Code: "x + 2"}, client.CodeOptions{}); err != nil || ex.Error != nil || ex.Text() != "42" {
			t.Fatalf("run_code in fork %s: %+v %v, want 42 from the source's kernel", f.ID, ex, err)
		}
		if st, body := page(f.ID); st != 200 || body != "served-by-source\n" {
			t.Fatalf("fork %s's server: %d %q", f.ID, st, body)
		}
		run(f.ID, "echo "+f.ID+" > /workspace/site/own.txt")
		if st, body := call(t, s, s.Key, "GET", "/v1/sandboxes/"+f.ID+"/ports/8000/own.txt", nil); st != 200 || string(body) != f.ID+"\n" {
			t.Fatalf("fork %s serves its own file: %d %q", f.ID, st, body)
		}
		for m, v := range map[*map[string]string]string{&boots: run(f.ID, "cat /proc/sys/kernel/random/boot_id"), &rands: run(f.ID, "head -c 16 /dev/urandom | od -An -tx1")} {
			if other, dup := (*m)[v]; dup {
				t.Fatalf("fork %s and %s read the same %q", f.ID, other, v)
			}
			(*m)[v] = f.ID
		}
	}
	if out := run(src.ID, "ls /workspace/site"); out != "index.txt\n" {
		t.Fatalf("the source after the forks: %q", out)
	}
	if ex, err := c.RunCode(ctx, src.ID, api.CodeRequest{Code: "x + 1"}, client.CodeOptions{}); err != nil || ex.Error != nil || ex.Text() != "41" {
		t.Fatalf("the source's kernel after the forks: %+v %v", ex, err)
	}
	return src, run
}

// TestForkMicroVM is TestFork's first part for a microVM (under TCG: one
// fork), through the API: the fork's kernel, server, files, boot id,
// randomness and address are its own.
func TestForkMicroVM(t *testing.T) {
	testenv.RequiresMicroVM(t)
	s := testenv.StartServer(t, "--microvm-accel", "tcg")
	c := newClient(t, s, s.Key)
	src, _ := forkAndCheck(t, s, c, `{"isolation":"microvm","vcpus":1,"memory_mib":1024}`, 1)
	_, data := call(t, s, s.Key, "GET", "/v1/sandboxes", nil)
	var list api.SandboxList
	if err := json.Unmarshal(data, &list); err != nil || len(list.Sandboxes) != 2 {
		t.Fatalf("list: %v %s", err, data)
	}
	var ids []string
	for _, sb := range list.Sandboxes {
		if sb.Isolation != "microvm" {
			t.Fatalf("%s: isolation %q", sb.ID, sb.Isolation)
		}
		ids = append(ids, sb.ID)
		if st, data := call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+sb.ID, nil); st != 204 && st != 200 {
			t.Fatalf("stopping %s: %d %s", sb.ID, st, data)
		}
	}
	if got := leftovers(t, s.DataDir, append(ids, src.ID)); len(got) > 0 {
		t.Fatalf("left behind: %v", got)
	}
}
