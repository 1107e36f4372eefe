package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// The CLI as docker and kubectl users expect it, against a real server and
// real gVisor sandboxes: sandbox ls lists the live sandboxes (-a adds the
// ended ones), exec -d starts a background process that ps lists, logs -f
// follows and kill ends, and a lease too long is refused in --timeout's
// terms.
func TestCLIHabits(t *testing.T) {
	s := testenv.StartServer(t)
	env := s.Env()
	create := func() string {
		t.Helper()
		out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "1024", "--timeout", "15m")
		if code != 0 {
			t.Fatalf("create: exit %d: %s", code, errs)
		}
		return strings.TrimSpace(out)
	}
	ended, live := create(), create()
	if _, errs, code := cli(t, env, "sandbox", "stop", ended); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, errs)
	}

	t.Run("ls lists the live sandboxes, -a the ended ones too", func(t *testing.T) {
		listed := func(args ...string) map[string]string {
			t.Helper()
			out, errs, code := cli(t, env, append([]string{"sandbox", "ls", "--json"}, args...)...)
			var l api.SandboxList
			if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
				t.Fatalf("ls %v: exit %d: %q %s", args, code, out, errs)
			}
			states := map[string]string{}
			for _, sb := range l.Sandboxes {
				states[sb.ID] = sb.State
			}
			return states
		}
		if got := listed(); got[live] != "running" || got[ended] != "" {
			t.Errorf("ls: got %v, want %s running and not %s, which ended", got, live, ended)
		}
		for _, flag := range []string{"-a", "--all"} {
			if got := listed(flag); got[live] != "running" || got[ended] != "ended" {
				t.Errorf("ls %s: got %v, want %s running and %s ended", flag, got, live, ended)
			}
		}
		out, _, code := cli(t, env, "sandbox", "ls")
		if code != 0 || !strings.Contains(out, live) || strings.Contains(out, ended) {
			t.Errorf("ls (table): exit %d, %q: want %s and not %s", code, out, live, ended)
		}
	})

	t.Run("exec -d, ps, logs -f and kill", func(t *testing.T) {
		start := func(argv ...string) int {
			t.Helper()
			out, errs, code := cli(t, env, append([]string{"sandbox", "exec", "-d", live, "--"}, argv...)...)
			pid, err := strconv.Atoi(strings.TrimSpace(out))
			if code != 0 || err != nil || errs != "" {
				t.Fatalf("exec -d %v: exit %d stdout %q stderr %q, want a pid", argv, code, out, errs)
			}
			return pid
		}
		// ps -a's STATUS of each pid.
		statuses := func(args ...string) map[int]string {
			t.Helper()
			out, errs, code := cli(t, env, append([]string{"sandbox", "ps"}, append(args, live)...)...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 0 || len(lines) == 0 || strings.Join(strings.Fields(lines[0]), " ") != "PID STATUS STARTED COMMAND" {
				t.Fatalf("ps %v: exit %d: %q %s", args, code, out, errs)
			}
			got := map[int]string{}
			for _, l := range lines[1:] {
				f := strings.Fields(l)
				pid, _ := strconv.Atoi(f[0])
				got[pid] = f[1]
				if f[1] == "exited" {
					got[pid] += " " + f[2]
				}
			}
			return got
		}

		// One that writes to both streams and ends by itself: logs -f
		// prints what it kept and what came later, and returns at the end.
		talker := start("sh", "-c", "echo first; echo warning >&2; sleep 2; echo second")
		out, errs, code := cli(t, env, "sandbox", "logs", "-f", live, strconv.Itoa(talker))
		if code != 0 || out != "first\nsecond\n" || errs != "warning\n" {
			t.Errorf("logs -f: exit %d stdout %q stderr %q, want first and second, warning, and 0", code, out, errs)
		}
		out, errs, code = cli(t, env, "sandbox", "logs", live, strconv.Itoa(talker))
		if code != 0 || out != "first\nsecond\n" || errs != "warning\n" {
			t.Errorf("logs: exit %d stdout %q stderr %q", code, out, errs)
		}

		// One that runs until killed, followed meanwhile.
		sleeper := start("sleep", "600")
		if got := statuses(); got[sleeper] != "running" || got[talker] != "" {
			t.Errorf("ps: got %v, want %d running and not %d, which ended", got, sleeper, talker)
		}
		follow := exec.Command(testenv.CLI(t), "sandbox", "logs", "--follow", live, strconv.Itoa(sleeper))
		follow.Env = env
		var fout, ferr bytes.Buffer
		follow.Stdout, follow.Stderr = &fout, &ferr
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		followed := make(chan error, 1)
		go func() { followed <- follow.Wait() }()
		time.Sleep(time.Second)
		select {
		case err := <-followed:
			t.Fatalf("logs -f of a running process returned at once: %v, %q", err, ferr.String())
		default:
		}
		out, errs, code = cli(t, env, "sandbox", "kill", live, strconv.Itoa(sleeper))
		if code != 0 || strings.TrimSpace(out) != strconv.Itoa(sleeper) {
			t.Fatalf("kill: exit %d stdout %q stderr %q", code, out, errs)
		}
		select {
		case err := <-followed:
			if err != nil {
				t.Errorf("logs -f of the killed process: %v, stderr %q", err, ferr.String())
			}
		case <-time.After(30 * time.Second):
			follow.Process.Kill()
			t.Errorf("logs -f still follows 30s after its process was killed")
		}
		if got := statuses(); len(got) != 0 {
			t.Errorf("ps after kill: got %v, want none running", got)
		}
		got := statuses("-a")
		if got[talker] != "exited 0" || got[sleeper] != "exited 137" {
			t.Errorf("ps -a: got %v, want %d exited 0 and %d exited 137 (SIGKILL)", got, talker, sleeper)
		}
		out, _, code = cli(t, env, "sandbox", "ps", "-a", "--json", live)
		var l api.ProcessList
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Processes) != 2 {
			t.Errorf("ps -a --json: exit %d, %q", code, out)
		}

		_, errs, code = cli(t, env, "sandbox", "logs", live, "99999")
		if code != 1 || !strings.HasPrefix(errs, "error: not_found: ") {
			t.Errorf("logs of no process: exit %d stderr %q, want 1 and not_found", code, errs)
		}
	})

	t.Run("--timeout 48h is refused in the flag's terms", func(t *testing.T) {
		const want = "error: invalid_request: --timeout must be between 1s and 24h0m0s, not 48h\n"
		for _, tt := range []struct {
			args     []string
			wantCode int
		}{
			{[]string{"sandbox", "create", "--timeout", "48h"}, 1},
			{[]string{"sandbox", "run", "--timeout", "48h", "--", "true"}, 125},
			{[]string{"sandbox", "extend", live, "--timeout", "48h"}, 1},
		} {
			out, errs, code := cli(t, env, tt.args...)
			if code != tt.wantCode || errs != want || out != "" {
				t.Errorf("%v: exit %d stdout %q stderr %q, want %d and %q", tt.args, code, out, errs, tt.wantCode, want)
			}
		}
	})
}
