package gvisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestSharedCheckpointResumesOnAnotherNode pauses a sandbox on backend A
// and resumes it on backend B: two data dirs (two nodes) that share the
// cache and the checkpoint dir. The file it wrote and a process that keeps
// a secret only in its memory are back; nothing of it stays in A's data
// dir while it is paused, and nothing in the shared dir once B has it.
func TestSharedCheckpointResumesOnAnotherNode(t *testing.T) {
	testenv.RequiresGvisor(t)
	shared := t.TempDir()
	newBackend := func() (*Backend, string) {
		dir := t.TempDir()
		b, err := New(Config{DataDir: dir, CacheDir: testenv.CacheDir(), SharedCheckpoints: shared})
		if err != nil {
			t.Fatal(err)
		}
		return b, dir
	}
	a, dirA := newBackend()
	b, dirB := newBackend()
	ctx := t.Context()
	id := fmt.Sprintf("sbx5a%014x", os.Getpid())
	t.Cleanup(func() {
		a.Destroy(context.Background(), id)
		b.Destroy(context.Background(), id)
	})
	spec := sandbox.Spec{Image: image.DefaultName, VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256}
	inst, err := a.Start(ctx, id, spec)
	if err != nil {
		t.Fatal(err)
	}
	hc := agentClient(inst)
	run(t, hc, "sh", "-c", "echo written-on-a > /root/note")
	// The secret lives in the shell's variable only; USR1 makes it say it.
	background(t, hc, "sh", "-c", `s=$(cat /proc/sys/kernel/random/uuid); trap 'echo $s > /root/said' USR1; echo $$ > /root/keeper.pid; while :; do sleep 0.1; done`)
	secret := say(t, hc)
	hc.CloseIdleConnections()

	if err := a.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(shared, id, "checkpoint", "checkpoint.img")); err != nil {
		t.Fatalf("paused with shared checkpoints: no checkpoint in the shared dir: %v", err)
	}
	if _, err := os.Stat(a.paths(id).state); !os.IsNotExist(err) {
		t.Fatalf("paused with shared checkpoints: %s is left in node A's data dir (%v)", a.paths(id).state, err)
	}

	digest := a.CheckpointDigest(id)
	if !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("the pause's digest: got %q, want sha256:...", digest)
	}
	// A checkpoint changed in the shared dir since its pause is refused,
	// and left as it is.
	img := filepath.Join(shared, id, "checkpoint", "checkpoint.img")
	orig := flipByte(t, img, 64)
	if _, err := b.ResumeDigest(ctx, id, spec, digest); err == nil || !strings.Contains(err.Error(), "not the one its pause saved") {
		t.Fatalf("resuming a tampered checkpoint: got %v, want a refusal", err)
	}
	writeByte(t, img, 64, orig)

	inst, err = b.ResumeDigest(ctx, id, spec, digest)
	if err != nil {
		t.Fatalf("resuming on node B: %v", err)
	}
	hc = agentClient(inst)
	defer hc.CloseIdleConnections()
	if got := run(t, hc, "cat", "/root/note"); got != "written-on-a\n" {
		t.Errorf("the file on node B: got %q, want %q", got, "written-on-a\n")
	}
	if got := say(t, hc); got != secret {
		t.Errorf("the process's secret on node B: got %q, want %q (its memory from node A)", got, secret)
	}
	if _, err := os.Stat(filepath.Join(shared, id)); !os.IsNotExist(err) {
		t.Errorf("after the resume the shared dir still holds %s (%v)", id, err)
	}
	if _, err := os.Stat(filepath.Join(dirB, "sandboxes", id)); err != nil {
		t.Errorf("running on node B: its state is not in B's data dir: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dirA, "sandboxes"))
	if len(entries) != 0 {
		t.Errorf("node A's data dir holds %d sandboxes, want none", len(entries))
	}

	// Paused again on B, and destroyed there: the shared dir is empty.
	hc.CloseIdleConnections()
	if err := b.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(shared, id)); !os.IsNotExist(err) {
		t.Errorf("after Destroy the shared dir still holds %s (%v)", id, err)
	}
}

// TestFreezeStopsAndThawContinues: a frozen sandbox's busy process uses no
// CPU and its agent does not answer; thawed, the same process goes on.
func TestFreezeStopsAndThawContinues(t *testing.T) {
	testenv.RequiresGvisor(t)
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id := fmt.Sprintf("sbxfreeze%d", os.Getpid())
	t.Cleanup(func() { b.Destroy(context.Background(), id) })
	spec := sandbox.Spec{Image: image.DefaultName, VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256}
	inst, err := b.Start(ctx, id, spec)
	if err != nil {
		t.Fatal(err)
	}
	hc := agentClient(inst)
	defer hc.CloseIdleConnections()
	background(t, hc, "sh", "-c", "echo $$ > /root/spin.pid; while :; do :; done")
	pid := strings.TrimSpace(run(t, hc, "sh", "-c", "while [ ! -s /root/spin.pid ]; do sleep 0.05; done; cat /root/spin.pid"))
	waitCPU(t, b, id, 200*time.Millisecond, "before the freeze")

	if err := b.Freeze(ctx, id); err != nil {
		t.Fatal(err)
	}
	before := cpuTime(t, b, id)
	time.Sleep(time.Second)
	used := cpuTime(t, b, id) - before
	t.Logf("CPU used while frozen for 1s: %v", used)
	if used > 100*time.Millisecond {
		t.Errorf("frozen for 1s with a busy process: it used %v of CPU, want next to none", used)
	}
	// The agent is frozen too.
	actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	req, _ := http.NewRequestWithContext(actx, "GET", "http://agent/healthz", nil)
	if resp, err := hc.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("the agent of a frozen sandbox answered: %s", resp.Status)
	}
	cancel()
	hc.CloseIdleConnections()

	if err := b.Thaw(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitCPU(t, b, id, 200*time.Millisecond, "after the thaw")
	if got := run(t, hc, "sh", "-c", "kill -0 "+pid+" && echo alive"); got != "alive\n" {
		t.Errorf("the busy process after the thaw: got %q, want it alive", got)
	}
}

func agentClient(inst sandbox.Instance) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return inst.DialAgent(ctx) },
	}}
}

// run runs argv as root in the sandbox and returns its stdout; it fails
// the test unless it exits 0.
func run(t *testing.T, hc *http.Client, argv ...string) string {
	t.Helper()
	body, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Argv: argv}, User: api.UserRoot})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://agent/exec", bytes.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	defer resp.Body.Close()
	var out, errOut string
	exit := -1
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("decoding %q: %v", sc.Bytes(), err)
		}
		switch ev.Type {
		case api.EventStdout, api.EventStderr:
			s, err := ev.Output()
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == api.EventStdout {
				out += s
			} else {
				errOut += s
			}
		case api.EventExit:
			if ev.ExitCode != nil {
				exit = *ev.ExitCode
			}
		}
	}
	if exit != 0 {
		t.Fatalf("exec %q: exit %d, stderr %q", argv, exit, errOut)
	}
	return out
}

// background starts argv as a background process of the agent.
func background(t *testing.T, hc *http.Client, argv ...string) {
	t.Helper()
	body, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Argv: argv}, User: api.UserRoot, Background: true})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://agent/exec", bytes.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("background %q: %v", argv, err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("background %q: %s: %s", argv, resp.Status, data)
	}
}

// say signals the secret-keeping process and returns what it wrote.
func say(t *testing.T, hc *http.Client) string {
	t.Helper()
	return run(t, hc, "sh", "-c", `rm -f /root/said; i=0; while [ ! -s /root/keeper.pid ]; do i=$((i+1)); [ $i -le 400 ] || exit 2; sleep 0.05; done; kill -USR1 $(cat /root/keeper.pid); i=0; while [ ! -s /root/said ]; do i=$((i+1)); [ $i -le 400 ] || exit 3; sleep 0.05; done; cat /root/said`)
}

func cpuTime(t *testing.T, b *Backend, id string) time.Duration {
	t.Helper()
	d, err := b.CPUTime(id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitCPU waits until the sandbox has used d more CPU: its busy process
// runs.
func waitCPU(t *testing.T, b *Backend, id string, d time.Duration, when string) {
	t.Helper()
	start := cpuTime(t, b, id)
	for deadline := time.Now().Add(30 * time.Second); cpuTime(t, b, id)-start < d; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the busy process used less than %v of CPU in 30s", when, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// flipByte inverts the byte at off of file and returns what it was.
func flipByte(t *testing.T, file string, off int64) byte {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	orig := b[0]
	b[0] = ^orig
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	return orig
}

func writeByte(t *testing.T, file string, off int64, v byte) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{v}, off); err != nil {
		t.Fatal(err)
	}
}
