package agent

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/api"
)

// reaperHelperVar makes TestReaperHelper run: it must be a process of its
// own, since a reaper takes every unowned child of its process.
const reaperHelperVar = "WITHRUNTIME_TEST_REAPER"

func TestReaperHelper(t *testing.T) {
	if os.Getenv(reaperHelperVar) == "" {
		t.Skip("run by TestReapOrphans in a process of its own")
	}
	// As PID 1 is in a sandbox, this process is where orphans end up.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	a := newTestAgent(t)
	a.srv.ReapOrphans()
	var orphans []int
	for i := 0; i < 20; i++ {
		// Each command leaves an orphan behind and exits with its own
		// code: the reaper must take the orphan and never the command.
		res := a.run(api.ExecRequest{Cmd: sh("sleep 0.05 & echo $!; exit 3")})
		if res.code() != 3 {
			t.Fatalf("run %d: got exit %d, want 3 (stderr %q)", i, res.code(), res.stderr)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(res.stdout))
		if err != nil {
			t.Fatalf("run %d: stdout %q", i, res.stdout)
		}
		orphans = append(orphans, pid)
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range orphans {
		for {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				state, ppid, _ := statePpid(pid)
				t.Fatalf("orphan %d still there (state %c, parent %d)", pid, state, ppid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestReapOrphans(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperHelper$", "-test.v")
	cmd.Env = append(os.Environ(), reaperHelperVar+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReaperHelper") {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}
