package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// The local daemon: the CLI with WITHRUNTIME_BASE_URL unset starts
// "withruntime serve" in the background on the default address, as a user
// gets it. These tests use that very address, one at a time, with private
// data and configuration directories; each stops its daemon at the end.

const daemonURL = "http://127.0.0.1:7878"

// localDaemon returns the environment of a user with nothing configured
// (private XDG directories) and the daemon's data dir. It skips when
// something already answers on the default address (a real daemon, which
// the test must not touch), and stops the daemon when the test ends,
// checking that nothing is left answering there.
func localDaemon(t *testing.T, extra ...string) ([]string, string) {
	t.Helper()
	testenv.RequiresGvisor(t)
	if answers(daemonURL) {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have %s free for the daemon tests (scripts/test.sh stops up.sh's daemon)", daemonURL)
		}
		t.Skipf("something already answers on %s: not touching it", daemonURL)
	}
	data := t.TempDir()
	env := append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"XDG_DATA_HOME=" + data, "XDG_CONFIG_HOME=" + t.TempDir(),
	}, extra...)
	dir := filepath.Join(data, "withruntime")
	t.Cleanup(func() {
		if _, errs, code := cli(t, env, "daemon", "stop"); code != 0 {
			t.Errorf("daemon stop: exit %d %q", code, errs)
		}
		if answers(daemonURL) {
			t.Errorf("something still answers on %s after daemon stop", daemonURL)
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "daemon.log"))
			t.Logf("daemon.log:\n%s", b)
		}
	})
	return env, dir
}

// answers says whether a server answers GET /v1/health at base.
func answers(base string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(base + "/v1/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// daemonPids returns the pids of the "serve" processes on data dir dir.
func daemonPids(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == "serve" && strings.Contains(string(b), "\x00--data-dir\x00"+dir+"\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// getSandbox runs "sandbox get ID --json".
func getSandbox(t *testing.T, env []string, id string) api.Sandbox {
	t.Helper()
	out, errs, code := cli(t, env, "sandbox", "get", id, "--json")
	if code != 0 {
		t.Fatalf("sandbox get: exit %d %q", code, errs)
	}
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(out), &sb); err != nil {
		t.Fatalf("sandbox get --json: %v in %q", err, out)
	}
	return sb
}

// daemonRunning says what "daemon status" says.
func daemonRunning(t *testing.T, env []string) (bool, string) {
	t.Helper()
	out, errs, code := cli(t, env, "daemon", "status")
	if code != 0 {
		t.Fatalf("daemon status: exit %d %q", code, errs)
	}
	return strings.HasPrefix(out, "running\n"), out
}

func TestDaemonStartsAndStops(t *testing.T) {
	env, dir := localDaemon(t)
	if running, out := daemonRunning(t, env); running {
		t.Fatalf("status before any command: got %q, want not running", out)
	}
	if _, errs, code := cli(t, env, "daemon", "stop"); code != 0 {
		t.Fatalf("stop with no daemon: exit %d %q, want 0", code, errs)
	}

	out, errs, code := cli(t, env, "sandbox", "run", "--vcpus", "1", "--memory", "1024", "--", "python3", "-c", "print(6 * 7)")
	if out != "42\n" || code != 0 {
		t.Fatalf("got %q (stderr %q) exit %d, want 42 and 0", out, errs, code)
	}
	log := filepath.Join(dir, "daemon.log")
	if !strings.Contains(errs, "started the local daemon") || !strings.Contains(errs, log) {
		t.Errorf("stderr: got %q, want the line saying the daemon started and where its log is", errs)
	}
	// A second command finds it and says nothing about it.
	if _, errs, code := cli(t, env, "sandbox", "ls"); code != 0 || errs != "" {
		t.Fatalf("ls: exit %d stderr %q, want 0 and nothing", code, errs)
	}

	pids := daemonPids(t, dir)
	if len(pids) != 1 {
		t.Fatalf("daemon processes: got %v, want one", pids)
	}
	running, status := daemonRunning(t, env)
	for _, want := range []string{fmt.Sprintf("pid: %d\n", pids[0]), daemonURL, dir, log} {
		if !running || !strings.Contains(status, want) {
			t.Errorf("status: got %q, want running and %q", status, want)
		}
	}
	// Detached: a session of its own, so the command's Ctrl-C or hangup
	// never reaches it.
	if sid, err := sessionOf(pids[0]); err != nil || sid != pids[0] {
		t.Errorf("daemon session: got %d (%v), want its own (%d)", sid, err, pids[0])
	}

	if _, errs, code := cli(t, env, "daemon", "stop"); code != 0 {
		t.Fatalf("stop: exit %d %q", code, errs)
	}
	if got := daemonPids(t, dir); len(got) != 0 {
		t.Errorf("daemon processes after stop: %v", got)
	}
	if running, out := daemonRunning(t, env); running {
		t.Errorf("status after stop: %q", out)
	}
}

// sessionOf returns the session id of a process (field 6 of /proc/PID/stat).
func sessionOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return strconv.Atoi(fields[3])
}

func TestDaemonEnforcesLeases(t *testing.T) {
	env, _ := localDaemon(t)
	out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "512", "--timeout", "3")
	if code != 0 {
		t.Fatalf("create: exit %d %q", code, errs)
	}
	id := strings.TrimSpace(out)
	// No command runs meanwhile: only the daemon can end it.
	time.Sleep(8 * time.Second)
	asked := time.Now()
	sb := getSandbox(t, env, id)
	if sb.State != "ended" || sb.EndReason != "lease_ended" {
		t.Fatalf("after the lease: state %q end_reason %q, want ended lease_ended", sb.State, sb.EndReason)
	}
	if sb.EndedAt == nil || !sb.EndedAt.Before(asked.Add(-2*time.Second)) {
		t.Errorf("ended_at %v: want it well before the get at %v (ended by the daemon, not by the get)", sb.EndedAt, asked)
	}
}

func TestDaemonSharedByConcurrentCommands(t *testing.T) {
	env, dir := localDaemon(t)
	const n = 6
	type result struct {
		out, errs string
		code      int
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(testenv.CLI(t), "sandbox", "run", "--vcpus", "1", "--memory", "512", "--", "echo", "ok")
			cmd.Env = env
			var out, errs strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errs
			err := cmd.Run()
			code := cmd.ProcessState.ExitCode()
			if err != nil && code == 0 {
				code = -1
			}
			results[i] = result{out.String(), errs.String(), code}
		}()
	}
	wg.Wait()
	started := 0
	for i, r := range results {
		if r.code != 0 || r.out != "ok\n" {
			t.Errorf("run %d: exit %d stdout %q stderr %q, want 0 and ok", i, r.code, r.out, r.errs)
		}
		started += strings.Count(r.errs, "started the local daemon")
	}
	if started != 1 {
		t.Errorf("commands that started the daemon: got %d, want 1", started)
	}
	if pids := daemonPids(t, dir); len(pids) != 1 {
		t.Errorf("daemon processes: got %v, want exactly one", pids)
	}
}

func TestDaemonPythonNothingSet(t *testing.T) {
	env, _ := localDaemon(t)
	if _, errs, code := cli(t, env, "sandbox", "ls"); code != 0 {
		t.Fatalf("ls: exit %d %q", code, errs)
	}
	py := exec.Command("/usr/bin/python3", "-c", `
from withruntime import Sandbox
sbx = Sandbox.create(vcpus=1, memory_mib=512, timeout_seconds=60)
try:
    print(sbx.exec(["echo", "from python"]).stdout, end="")
finally:
    sbx.stop()
`)
	py.Env = append(env, "PYTHONPATH="+filepath.Join(testenv.Root(), "sdk", "python"))
	out, err := py.CombinedOutput()
	if err != nil || string(out) != "from python\n" {
		t.Fatalf("Sandbox.create() with nothing set: %v, output %q", err, out)
	}
}

func TestDaemonExitsWhenIdle(t *testing.T) {
	env, dir := localDaemon(t, "WITHRUNTIME_DAEMON_IDLE_EXIT=2s")
	out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "512", "--timeout", "120")
	if code != 0 {
		t.Fatalf("create: exit %d %q", code, errs)
	}
	id := strings.TrimSpace(out)

	// Alive sandboxes, running then paused, keep it; 2 s idle would not.
	time.Sleep(5 * time.Second)
	if running, st := daemonRunning(t, env); !running {
		t.Fatalf("daemon exited with a sandbox running: %q", st)
	}
	if _, errs, code := cli(t, env, "sandbox", "pause", id); code != 0 {
		t.Fatalf("pause: exit %d %q", code, errs)
	}
	time.Sleep(5 * time.Second)
	if running, st := daemonRunning(t, env); !running {
		t.Fatalf("daemon exited with a sandbox paused: %q", st)
	}

	if _, errs, code := cli(t, env, "sandbox", "rm", id); code != 0 {
		t.Fatalf("rm: exit %d %q", code, errs)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		running, _ := daemonRunning(t, env)
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon still running 60 s after its last sandbox ended (idle exit 2s)")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if answers(daemonURL) {
		t.Errorf("something answers on %s after the idle exit", daemonURL)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "daemon.log"))
	if !strings.Contains(string(b), "exiting: idle") {
		t.Errorf("daemon.log does not say it exited idle:\n%s", b)
	}
	// The next command starts it again.
	if _, errs, code := cli(t, env, "sandbox", "ls"); code != 0 || !strings.Contains(errs, "started the local daemon") {
		t.Errorf("ls after the idle exit: exit %d stderr %q, want the daemon started again", code, errs)
	}
}
