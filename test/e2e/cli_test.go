package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

func TestCLIAgainstServer(t *testing.T) {
	s := testenv.StartServer(t)
	env := s.Env()

	t.Run("run prints and exits with the command's code", func(t *testing.T) {
		out, errs, code := cli(t, env, "sandbox", "run", "--vcpus", "1", "--memory", "1024", "--", "python3", "-c", "print(6 * 7)")
		if out != "42\n" || code != 0 {
			t.Fatalf("got %q (stderr %q) exit %d, want 42 and 0", out, errs, code)
		}
		_, _, code = cli(t, env, "sandbox", "run", "--vcpus", "1", "--memory", "1024", "--", "sh", "-c", "exit 3")
		if code != 3 {
			t.Fatalf("got exit %d, want 3", code)
		}
		out, _, code = cli(t, env, "sandbox", "run", "--vcpus", "1", "--memory", "1024", "--env", "K=v", "--cwd", "/tmp", "--", "sh", "-c", "echo $K; pwd")
		if out != "v\n/tmp\n" || code != 0 {
			t.Fatalf("env and cwd: got %q exit %d", out, code)
		}
		_, _, code = cli(t, env, "sandbox", "run", "--vcpus", "1", "--memory", "1024", "--exec-timeout", "1", "--", "sleep", "30")
		if code == 0 {
			t.Fatalf("--exec-timeout: got exit 0 from a killed command")
		}
	})

	t.Run("platform failures exit 125 with a stable code", func(t *testing.T) {
		tests := []struct {
			name     string
			env      []string
			args     []string
			wantCode int
			wantErr  string
		}{
			{"refused", env, []string{"sandbox", "run", "--vcpus", "99", "--", "true"}, 125, "error: invalid_request: "},
			{"bad key", append(os.Environ(), "WITHRUNTIME_BASE_URL="+s.URL, "WITHRUNTIME_API_KEY=wr_wrong"), []string{"sandbox", "run", "--", "true"}, 125, "error: unauthorized: "},
			{"unreachable, never a fallback", append(os.Environ(), "WITHRUNTIME_BASE_URL=http://127.0.0.1:1", "WITHRUNTIME_API_KEY=x"), []string{"sandbox", "run", "--", "true"}, 125, "error: unavailable: "},
			{"other commands exit 1", append(os.Environ(), "WITHRUNTIME_BASE_URL=http://127.0.0.1:1", "WITHRUNTIME_API_KEY=x"), []string{"sandbox", "ls"}, 1, "error: unavailable: "},
			{"unknown sandbox", env, []string{"sandbox", "exec", "sbx0000000000000000", "--", "true"}, 125, "error: not_found: "},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, errs, code := cli(t, tt.env, tt.args...)
				if code != tt.wantCode || !strings.HasPrefix(errs, tt.wantErr) {
					t.Fatalf("got exit %d stderr %q, want %d and %q", code, errs, tt.wantCode, tt.wantErr)
				}
			})
		}
	})

	t.Run("create, exec, pause, resume, ls and rm", func(t *testing.T) {
		out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "1024", "--timeout", "15m", "--json")
		var sb api.Sandbox
		if code != 0 || json.Unmarshal([]byte(out), &sb) != nil || sb.State != "running" {
			t.Fatalf("create: got %q %q exit %d", out, errs, code)
		}
		if out, _, code := cli(t, env, "sandbox", "exec", sb.ID, "--", "sh", "-c", "echo state > f; cat f"); out != "state\n" || code != 0 {
			t.Fatalf("exec: got %q exit %d", out, code)
		}
		for _, verb := range []string{"pause", "resume"} {
			if _, errs, code := cli(t, env, "sandbox", verb, sb.ID); code != 0 {
				t.Fatalf("%s: exit %d: %s", verb, code, errs)
			}
		}
		if out, _, _ := cli(t, env, "sandbox", "exec", sb.ID, "--", "cat", "f"); out != "state\n" {
			t.Fatalf("after resume: got %q", out)
		}
		out, _, code = cli(t, env, "sandbox", "ls", "--json")
		if code != 0 || !strings.Contains(out, sb.ID) {
			t.Fatalf("ls: got %q exit %d", out, code)
		}
		if _, errs, code := cli(t, env, "sandbox", "rm", sb.ID); code != 0 {
			t.Fatalf("rm: exit %d: %s", code, errs)
		}
		out, _, _ = cli(t, env, "sandbox", "get", sb.ID, "--json")
		if !strings.Contains(out, `"end_reason": "stopped"`) {
			t.Fatalf("get after rm: got %q, want end_reason stopped", out)
		}
		if got := leftovers(t, s.DataDir, []string{sb.ID}); len(got) > 0 {
			t.Fatalf("rm left behind: %v", got)
		}
	})
}
