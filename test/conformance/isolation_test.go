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
		t.Run("no network route out", func(t *testing.T) {
			got := e.out(t, sb.ID, "ip -o route | grep -vc ' dev lo' || true; ip -o -6 route | grep -vc ' dev lo' || true; ip -o link | grep -vc ' lo:' || true")
			if got != "0\n0\n0" {
				t.Fatalf("got routes and links off loopback %q, want none", got)
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
			_, err := e.c.Exec(ctx, bomb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"python3", "-c", "x = []\nwhile True: x.append(bytearray(64 << 20))"}}, TimeoutMs: 60000}, client.ExecOptions{})
			t.Logf("memory bomb exec: %v", err)
			if got := e.out(t, victim.ID, "echo alive"); got != "alive" {
				t.Fatalf("neighbour: got %q", got)
			}
			sb, err := e.c.GetSandbox(ctx, bomb.ID)
			if err != nil {
				t.Fatal(err)
			}
			// Either the sandbox's kernel killed the process and the sandbox
			// lives on, or the host's limit ended the sandbox: then its end
			// reason must say so.
			if sb.State == string(sandbox.StateEnded) && sb.EndReason != string(sandbox.EndOutOfMemory) {
				t.Fatalf("bomb sandbox ended with %q, want out_of_memory", sb.EndReason)
			}
			t.Logf("after the memory bomb the sandbox is %s %s", sb.State, sb.EndReason)
		})
		_ = time.Second
	})
}
