package conformance

import (
	"os"
	"path/filepath"
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
			res, err := e.c.Exec(ctx, bomb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"python3", "-c", "x = []\nwhile True: x.append(bytearray(64 << 20))"}}, TimeoutMs: 60000}, client.ExecOptions{})
			if err == nil && res.ExitCode == 0 {
				t.Fatalf("the memory bomb finished normally: %+v", res)
			}
			if got := e.out(t, victim.ID, "echo alive"); got != "alive" {
				t.Fatalf("neighbour: got %q", got)
			}
			// Either the host's limit killed only the bomb and the sandbox
			// answers, or it ended the sandbox and the end reason says so.
			deadline := time.Now().Add(5 * time.Second)
			for {
				sb, err := e.c.GetSandbox(ctx, bomb.ID)
				if err != nil {
					t.Fatal(err)
				}
				if sb.State == string(sandbox.StateEnded) {
					if sb.EndReason != string(sandbox.EndOutOfMemory) {
						t.Fatalf("bomb sandbox ended with %q, want out_of_memory", sb.EndReason)
					}
					t.Logf("the memory bomb ended its sandbox: out_of_memory")
					break
				}
				if r, err := e.c.Exec(ctx, bomb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"echo", "alive"}}}, client.ExecOptions{}); err == nil && r.Stdout == "alive\n" {
					t.Logf("the memory bomb was killed, its sandbox lives on")
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("bomb sandbox neither answers nor ended: %+v", sb)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		t.Run("memory file systems past the limit", func(t *testing.T) {
			// /tmp and /dev/shm hold half the memory each; filling both
			// leaves nothing for the sandbox's own kernel, and the host's
			// limit ends the sandbox with a reason that says so.
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
