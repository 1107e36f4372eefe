package agent

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
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
	checkWaitable(t)
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

// checkWaitable: waitable names a zombie child and leaves it waitable,
// and finds none once it is reaped (this process has no other children).
func checkWaitable(t *testing.T) {
	t.Helper()
	if pid, ok := waitable(); ok {
		t.Fatalf("before any child: waitable gave %d", pid)
	}
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		got, ok := waitable()
		if ok {
			if got != pid {
				t.Fatalf("got waitable %d, want %d", got, pid)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d never waitable", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var ws syscall.WaitStatus
	if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); got != pid || err != nil {
		t.Fatalf("wait4 after waitable: got %d, %v, want %d: waitable must leave the child waitable", got, err, pid)
	}
	if got, ok := waitable(); ok {
		t.Fatalf("after the reap: waitable gave %d", got)
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
