package conformance

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/sandbox"
)

func TestIsolation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		sb := e.create(t, small())
		t.Run("host flag file is out of reach", func(t *testing.T) {
			dir := t.TempDir()
			flag := filepath.Join(dir, "flag")
			os.WriteFile(flag, []byte("FLAG-ON-HOST"), 0o644)
			res := e.sh(t, sb.ID, "cat "+flag+"; sudo cat "+flag+"; sudo find / -xdev -name flag 2>/dev/null | xargs -r sudo cat")
			if strings.Contains(res.Stdout, "FLAG-ON-HOST") {
				t.Fatalf("the sandbox read the host's flag file")
			}
			res = e.sh(t, sb.ID, "sudo sh -c 'echo pwned > "+flag+"'")
			if got, _ := os.ReadFile(flag); string(got) != "FLAG-ON-HOST" {
				t.Fatalf("the sandbox changed the host's flag file: %q", got)
			}
		})
		t.Run("the kernel is the backend's own", func(t *testing.T) {
			got := e.out(t, sb.ID, "dmesg 2>/dev/null | head -3; uname -r")
			host, _ := os.ReadFile("/proc/sys/kernel/osrelease")
			if e.backend == "gvisor" && !strings.Contains(got, "gVisor") {
				t.Fatalf("dmesg does not show gVisor: %q", got)
			}
			if strings.Contains(got, strings.TrimSpace(string(host))) {
				t.Fatalf("the sandbox sees the host kernel %s", host)
			}
		})
		t.Run("no way out with the network off", func(t *testing.T) {
			// The sandbox's link exists (its policy can be changed live),
			// but the host drops every packet of a sandbox that is off:
			// not even its gateway, the host's own end, answers.
			got := e.out(t, sb.ID, `gw=$(ip -o route show default | awk '{print $3}'); test -n "$gw" || exit 3
timeout 3 bash -c "echo > /dev/tcp/$gw/80" 2>/dev/null && echo tcp-open || echo tcp-closed
timeout 3 python3 -c "import socket; socket.getaddrinfo('example.com', 443)" 2>/dev/null && echo dns-ok || echo dns-failed
ip -o -6 addr show scope global | wc -l`)
			if got != "tcp-closed\ndns-failed\n0" {
				t.Fatalf("got %q, want no TCP, no DNS and no IPv6 address", got)
			}
		})
	})
}

func TestBombsStayInside(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		victim := e.create(t, small())
		bomb := e.create(t, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, TimeoutSeconds: 600})
		t.Run("fork bomb", func(t *testing.T) {
			res, err := e.c.Exec(ctx, bomb.ID, api.ExecRequest{Cmd: api.Command{Shell: "b() { b | b & }; b"}, TimeoutMs: 5000}, client.ExecOptions{})
			if err != nil {
				t.Logf("fork bomb exec: %v", err)
			}
			_ = res
			if got := e.out(t, victim.ID, "echo alive"); got != "alive" {
				t.Fatalf("neighbour: got %q", got)
			}
			if err := e.c.Health(ctx); err != nil {
				t.Fatalf("API after the fork bomb: %v", err)
			}
		})
		t.Run("memory bomb", func(t *testing.T) {
			// As on Linux, a program that outgrows the sandbox's memory is
			// killed (the agent's OOM watch), and the sandbox lives on with
			// its files and its other processes.
			sb := e.create(t, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, TimeoutSeconds: 600})
			// A kernel of its own (a microVM's) keeps a little for itself.
			if got, _ := strconv.Atoi(e.out(t, sb.ID, "free -m | awk '/^Mem:/ {print $2}'")); got > 512 || got < 512*9/10 {
				t.Fatalf("free -m: got total %d MiB, want about 512", got)
			}
			e.out(t, sb.ID, "echo kept > /workspace/kept")
			bg, err := e.c.StartProcess(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"sleep", "600"}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, bomb := range []struct{ name, shell, wantOut string }{
				{"one large allocation", "python3 -c 'x = bytearray(1500*1024*1024)'", ""},
				{"a slow leak", "python3 -c 'x = []\nwhile True: x.append(bytearray(10 << 20))'", ""},
				// Each child allocates without end, so each must fail.
				{"four allocating processes", `for i in 1 2 3 4; do python3 -c 'x = []
while True: x.append(bytearray(10 << 20))' & pids="$pids $!"; done
failed=0; for p in $pids; do wait $p || failed=$((failed+1)); done; echo $failed; exit 1`, "4\n"},
			} {
				res, err := e.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Shell: bomb.shell}, TimeoutMs: 120000}, client.ExecOptions{})
				if err != nil {
					got, _ := e.c.GetSandbox(ctx, sb.ID)
					t.Fatalf("%s: %v (sandbox %+v)", bomb.name, err, got)
				}
				if res.ExitCode == 0 || res.TimedOut || res.Stdout != bomb.wantOut {
					t.Fatalf("%s: got exit %d (timed out %v), stdout %q, stderr %q; want it killed", bomb.name, res.ExitCode, res.TimedOut, res.Stdout, res.Stderr)
				}
				if got, err := e.c.GetSandbox(ctx, sb.ID); err != nil || got.State != string(sandbox.StateRunning) {
					t.Fatalf("after %s: got %+v, %v; want it running", bomb.name, got, err)
				}
				if got := e.out(t, sb.ID, "cat /workspace/kept"); got != "kept" {
					t.Fatalf("after %s: got file %q, want kept", bomb.name, got)
				}
				p, err := e.c.GetProcess(ctx, sb.ID, bg.Pid)
				if err != nil || !p.Running {
					t.Fatalf("after %s: background process: %+v, %v; want it running", bomb.name, p, err)
				}
			}
			if got := e.out(t, victim.ID, "echo alive"); got != "alive" {
				t.Fatalf("neighbour: got %q", got)
			}
			if err := e.c.Health(ctx); err != nil {
				t.Fatalf("API after the memory bombs: %v", err)
			}
		})
		t.Run("memory file systems past the limit", func(t *testing.T) {
			// /tmp and /dev/shm hold half the memory each; filling both
			// leaves nothing for the sandbox's own kernel, no kill frees
			// it, and the host's limit ends the sandbox with a reason that
			// says so: the one case that ends a sandbox for memory.
			sb := e.create(t, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, TimeoutSeconds: 600})
			if got := e.sh(t, sb.ID, "dd if=/dev/zero of=/tmp/fill bs=1M count=400 2>&1").Stdout; !strings.Contains(got, "No space left") {
				t.Fatalf("/tmp past its size: got %q, want ENOSPC", got)
			}
			e.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Shell: "dd if=/dev/zero of=/dev/shm/fill bs=1M count=400"}}, client.ExecOptions{})
			ended := e.waitState(t, sb.ID, sandbox.StateEnded, 10*time.Second)
			if ended.EndReason != string(sandbox.EndOutOfMemory) {
				t.Fatalf("got end reason %q, want out_of_memory", ended.EndReason)
			}
			if got := e.out(t, victim.ID, "echo alive"); got != "alive" {
				t.Fatalf("neighbour: got %q", got)
			}
		})
	})
}
