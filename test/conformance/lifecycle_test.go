package conformance

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// memTotalMiB reads the sandbox's MemTotal.
func memTotalMiB(t *testing.T, e *env, id string) int {
	t.Helper()
	kb, err := strconv.Atoi(e.out(t, id, "awk '/MemTotal/ {print $2}' /proc/meminfo"))
	if err != nil {
		t.Fatal(err)
	}
	return kb / 1024
}

func TestSizes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tests := []struct {
			name      string
			req       api.CreateSandboxRequest
			wantCPUs  string
			memoryMiB int
		}{
			{"default 2 vCPU 4 GiB", api.CreateSandboxRequest{}, "2", 4096},
			{"1 vCPU 1 GiB", api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 1024}, "1", 1024},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				sb := e.create(t, tt.req)
				if sb.State != string(sandbox.StateRunning) {
					t.Fatalf("got state %s, want running", sb.State)
				}
				if got := e.out(t, sb.ID, "nproc"); got != tt.wantCPUs {
					t.Errorf("nproc: got %s, want %s", got, tt.wantCPUs)
				}
				// free -m shows a little less than the size: the kernel
				// keeps some for itself.
				if got := memTotalMiB(t, e, sb.ID); got > tt.memoryMiB || got < tt.memoryMiB*9/10 {
					t.Errorf("MemTotal: got %d MiB, want about %d", got, tt.memoryMiB)
				}
			})
		}
	})
}

func TestLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		req := small()
		req.Metadata = map[string]string{"task": "lifecycle"}
		req.Env = map[string]string{"GREETING": "hello"}
		sb := e.create(t, req)
		if sb.Metadata["task"] != "lifecycle" || sb.StartedAt == nil || sb.LeaseEndsAt.Before(time.Now().Add(9*time.Minute)) {
			t.Fatalf("got %+v, want metadata, a start time and a 10-minute lease", sb)
		}
		if got := e.out(t, sb.ID, "echo $GREETING; id -un; pwd; echo $HOME"); got != "hello\nuser\n/workspace\n/home/user" {
			t.Fatalf("got %q, want the sandbox env, user, /workspace and the user's home", got)
		}
		if got := e.out(t, sb.ID, "sudo -n id -u"); got != "0" {
			t.Fatalf("sudo: got %q, want 0", got)
		}
		if got := e.out(t, sb.ID, ". /etc/os-release; echo $VERSION_CODENAME; python3 -m pip --version | cut -d' ' -f1; git --version | cut -d' ' -f1; curl --version | head -c4"); got != "trixie\npip\ngit\ncurl" {
			t.Fatalf("image: got %q", got)
		}
		list, err := e.c.ListSandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range list {
			found = found || s.ID == sb.ID
		}
		if !found {
			t.Fatalf("list does not show %s", sb.ID)
		}
		ext, err := e.c.ExtendSandbox(ctx, sb.ID, 3600)
		if err != nil || ext.LeaseEndsAt.Before(time.Now().Add(59*time.Minute)) {
			t.Fatalf("extend: got %+v, %v; want a lease an hour away", ext, err)
		}
		stopped, err := e.c.StopSandbox(ctx, sb.ID)
		if err != nil || stopped.State != string(sandbox.StateEnded) || stopped.EndReason != string(sandbox.EndStopped) || stopped.EndedAt == nil {
			t.Fatalf("stop: got %+v, %v; want ended/stopped", stopped, err)
		}
		_, err = e.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"true"}}}, client.ExecOptions{})
		if !errors.Is(err, client.ErrConflict) {
			t.Fatalf("exec on a stopped sandbox: got %v, want conflict", err)
		}
	})
}

func TestLeaseEnds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		req := small()
		req.TimeoutSeconds = e.lease(2)
		sb := e.create(t, req)
		// A command still running when the lease ends is killed with it,
		// and its stream ends with an error event saying so.
		res, err := e.c.Exec(t.Context(), sb.ID, api.ExecRequest{Cmd: api.Command{Shell: "sleep 60"}}, client.ExecOptions{})
		if !errors.Is(err, client.ErrLeaseEnded) {
			t.Fatalf("sleep 60 in a 2-second lease: got %+v, %v; want lease_ended", res, err)
		}
		ended := e.waitState(t, sb.ID, sandbox.StateEnded, 10*time.Second)
		if ended.EndReason != string(sandbox.EndLeaseEnded) {
			t.Fatalf("got end reason %q, want lease_ended", ended.EndReason)
		}
		_, err = e.c.Exec(t.Context(), sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"true"}}}, client.ExecOptions{})
		if !errors.Is(err, client.ErrLeaseEnded) {
			t.Fatalf("exec after the lease: got %v, want lease_ended", err)
		}
	})
}

func TestPauseResumeKeepsFilesAndProcesses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		req := small()
		req.TimeoutSeconds = e.lease(3)
		req.OnLeaseEnd = "pause"
		sb := e.create(t, req)
		e.out(t, sb.ID, "echo kept > note.txt")
		proc, err := e.c.StartProcess(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Shell: "i=0; while true; do i=$((i+1)); echo $i > counter; sleep 0.1; done"}})
		if err != nil {
			t.Fatalf("background: %v", err)
		}
		// The lease ends and the sandbox pauses instead of stopping.
		paused := e.waitState(t, sb.ID, sandbox.StatePaused, 15*time.Second)
		if paused.RetentionEndsAt == nil || paused.PausedAt == nil {
			t.Fatalf("paused sandbox without retention: %+v", paused)
		}
		if _, err := e.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"true"}}}, client.ExecOptions{}); !errors.Is(err, client.ErrConflict) {
			t.Fatalf("exec on a paused sandbox: got %v, want conflict", err)
		}
		resumed, err := e.c.ResumeSandbox(ctx, sb.ID)
		if err != nil || resumed.State != string(sandbox.StateRunning) {
			t.Fatalf("resume: got %+v, %v", resumed, err)
		}
		if _, err := e.c.ExtendSandbox(ctx, sb.ID, 600); err != nil {
			t.Fatal(err)
		}
		if got := e.out(t, sb.ID, "cat note.txt"); got != "kept" {
			t.Fatalf("file after resume: got %q, want kept", got)
		}
		before, _ := strconv.Atoi(e.out(t, sb.ID, "cat counter"))
		time.Sleep(500 * time.Millisecond)
		after, _ := strconv.Atoi(e.out(t, sb.ID, "cat counter"))
		if after <= before {
			t.Fatalf("the loop did not continue after resume: counter %d then %d", before, after)
		}
		p, err := e.c.GetProcess(ctx, sb.ID, proc.Pid)
		if err != nil || !p.Running {
			t.Fatalf("background process after resume: got %+v, %v; want running", p, err)
		}
		// A manual pause and resume work too.
		if _, err := e.c.PauseSandbox(ctx, sb.ID); err != nil {
			t.Fatalf("pause: %v", err)
		}
		if _, err := e.c.ResumeSandbox(ctx, sb.ID); err != nil {
			t.Fatalf("resume: %v", err)
		}
		if got := e.out(t, sb.ID, "cat note.txt"); !strings.Contains(got, "kept") {
			t.Fatalf("file after second resume: got %q", got)
		}
	})
}

func TestUserInstalls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		sb := e.create(t, small())
		// A wheel made on the spot: pip installs it with no network.
		e.out(t, sb.ID, `python3 - <<'PY'
import zipfile
with zipfile.ZipFile("hello_wr-1.0-py3-none-any.whl", "w") as z:
    z.writestr("hello_wr.py", "def hi():\n    return 'hi from a user install'\n")
    z.writestr("hello_wr-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: hello-wr\nVersion: 1.0\n")
    z.writestr("hello_wr-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("hello_wr-1.0.dist-info/RECORD", "")
PY`)
		res := e.sh(t, sb.ID, "python3 -m pip install --user --no-index hello_wr-1.0-py3-none-any.whl")
		if res.ExitCode != 0 {
			t.Fatalf("pip install --user: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
		if got := e.out(t, sb.ID, "cd / && python3 -c 'import hello_wr; print(hello_wr.hi())'"); got != "hi from a user install" {
			t.Fatalf("the user install: got %q", got)
		}
		if res := e.sh(t, sb.ID, "sudo -n apt-get check"); res.ExitCode != 0 {
			t.Fatalf("sudo apt-get check: exit %d %s", res.ExitCode, res.Stderr)
		}
		python := e.out(t, sb.ID, "python3 -m venv /workspace/venv && /workspace/venv/bin/python -c 'import sys; print(sys.prefix)'")
		if python != "/workspace/venv" {
			t.Fatalf("venv: got %q", python)
		}
	})
}
