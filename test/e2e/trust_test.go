package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// attackChannel runs as root inside the attacker's sandbox, over and over:
// every entry of the agent's directories is replaced by a symlink to a host
// canary file or socket, or to the victim's socket; the directories are
// remounted read-write first. Each round's failures go to /tmp/attack.log.
const attackChannel = `
set +e
canary="$1"; canarysock="$2"; victim="$3"
while :; do
  mount -o remount,rw /run/withruntime
  mount -o remount,rw /opt/withruntime
  for d in /run/withruntime /opt/withruntime; do
    for f in agent.sock resume sandbox-agent new-entry; do
      rm -f "$d/$f"
      ln -sf "$canary" "$d/$f"
      ln -sf "$canarysock" "$d/$f.sock"
      ln -sf "../../$victim/sock/agent.sock" "$d/$f.victim"
      echo x > "$d/$f.file"
    done
  done
  [ -s /tmp/attack.done ] || echo done > /tmp/attack.done
  sleep 0.05
done >>/tmp/attack.log 2>&1
`

// fakeAgent runs as root inside the attacker's sandbox: it connects to the
// host's listener as the agent does and answers every request with an
// endless exec line.
const fakeAgent = `
import socket, threading
def fake():
    while True:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect('/run/withruntime/agent.sock')
            if s.recv(1) != b'H':
                s.close(); continue
            buf = b''
            while b'\r\n\r\n' not in buf:
                d = s.recv(65536)
                if not d: break
                buf += d
            s.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n{"type":"stdout","data":"')
            chunk = b'a' * 65536
            while True:
                s.sendall(chunk)
        except Exception:
            pass
for _ in range(32):
    threading.Thread(target=fake, daemon=True).start()
threading.Event().wait()
`

// TestSandboxCannotReachHostOrNeighbour attacks the host-agent channel as
// root inside a sandbox would, while the host execs, pauses and resumes it,
// and checks that no host file or socket was touched, that the victim (of
// another account) is untouched, and that the server's memory stays
// bounded against a fake agent.
func TestSandboxCannotReachHostOrNeighbour(t *testing.T) {
	s := testenv.StartServer(t)
	ctx := t.Context()
	newAccount(t, s, `{"name":"victim"}`)
	victimKey := newKey(t, s, `{"account":"victim"}`)
	attacker := newClient(t, s, s.Key)
	victim := newClient(t, s, victimKey.Secret)

	// Host canaries: a file with known content, a path that must never be
	// created, and a listening socket that must never be connected to.
	hostDir := t.TempDir()
	canary := filepath.Join(hostDir, "canary")
	if err := os.WriteFile(canary, []byte("host canary"), 0o600); err != nil {
		t.Fatal(err)
	}
	canaryStat, _ := os.Stat(canary)
	canarySock := filepath.Join(hostDir, "canary.sock")
	sockL, err := net.Listen("unix", canarySock)
	if err != nil {
		t.Fatal(err)
	}
	defer sockL.Close()
	var dialedCanary sync.WaitGroup
	hits := make(chan struct{}, 100)
	dialedCanary.Add(1)
	go func() {
		defer dialedCanary.Done()
		for {
			c, err := sockL.Accept()
			if err != nil {
				return
			}
			hits <- struct{}{}
			c.Close()
		}
	}()

	vb := mustCreate(t, victim, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512})
	mustExec(t, victim, vb.ID, "echo victim-data > /workspace/v.txt")
	ab := mustCreate(t, attacker, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, TimeoutSeconds: 600})

	t.Run("the sandbox sees exactly its own listener", func(t *testing.T) {
		out := mustExec(t, attacker, ab.ID, "sudo find / \\( -path /proc -o -path /sys \\) -prune -o -type s -print 2>/dev/null; sudo find /run/withruntime /opt/withruntime -mindepth 1")
		got := strings.Fields(out)
		want := []string{"/run/withruntime/agent.sock", "/run/withruntime/agent.sock", "/opt/withruntime/sandbox-agent"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("sockets and channel entries seen inside: got %q, want %q", got, want)
		}
	})

	script := fmt.Sprintf("cat > /tmp/attack.sh <<'EOF'\n%s\nEOF\nsudo sh /tmp/attack.sh %q %q %q", attackChannel, canary, canarySock, vb.ID)
	if _, err := attacker.StartProcess(ctx, ab.ID, api.ExecRequest{Cmd: api.Command{Shell: script}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the attack's first round", func() bool {
		out, _ := execOut(ctx, attacker, ab.ID, "cat /tmp/attack.done 2>/dev/null")
		return strings.TrimSpace(out) == "done"
	})

	t.Run("every write to the channel's directories is refused", func(t *testing.T) {
		log := mustExec(t, attacker, ab.ID, "sort -u /tmp/attack.log")
		for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
			if !strings.Contains(line, "Read-only file system") && !strings.Contains(line, "mount") {
				t.Errorf("an attack step did not fail read-only: %q", line)
			}
		}
		entries := mustExec(t, attacker, ab.ID, "sudo ls -A /run/withruntime /opt/withruntime")
		if strings.Contains(entries, "victim") || strings.Contains(entries, "new-entry") || strings.Contains(entries, ".file") {
			t.Fatalf("the attacker changed the channel's directories:\n%s", entries)
		}
	})

	t.Run("the console is no host file to fill", func(t *testing.T) {
		mustExec(t, attacker, ab.ID, "for fd in 0 1 2; do sudo sh -c \"head -c 8000000 /dev/zero > /proc/1/fd/$fd\" || true; done")
		console := filepath.Join(s.DataDir, "sandboxes", ab.ID, "console.log")
		if st, err := os.Stat(console); err == nil && st.Size() > 1<<20 {
			t.Fatalf("the sandbox wrote %d bytes into the host file %s", st.Size(), console)
		}
	})

	t.Run("pause and resume under the attack", func(t *testing.T) {
		if _, err := attacker.PauseSandbox(ctx, ab.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := attacker.ResumeSandbox(ctx, ab.ID); err != nil {
			t.Fatal(err)
		}
		if out := mustExec(t, attacker, ab.ID, "echo back"); out != "back\n" {
			t.Fatalf("got %q after resume, want %q", out, "back\n")
		}
		// The attack resumed with the sandbox and still fails.
		before := mustExec(t, attacker, ab.ID, "wc -l < /tmp/attack.log")
		eventually(t, 10*time.Second, "more attack rounds", func() bool {
			after, _ := execOut(ctx, attacker, ab.ID, "wc -l < /tmp/attack.log")
			return strings.TrimSpace(after) != strings.TrimSpace(before)
		})
	})

	t.Run("a fake agent lies only about its own sandbox", func(t *testing.T) {
		fake := fmt.Sprintf("cat > /tmp/fake.py <<'EOF'\n%s\nEOF\nsudo python3 /tmp/fake.py", fakeAgent)
		if _, err := attacker.StartProcess(ctx, ab.ID, api.ExecRequest{Cmd: api.Command{Shell: fake}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the fakes queue up behind the agent's spares
		rssBefore := rssKiB(t, s.Pid())
		var wg sync.WaitGroup
		var mu sync.Mutex
		fakes := 0
		for range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ectx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				if out, err := execOut(ectx, attacker, ab.ID, "sleep 1; echo real"); err != nil || out != "real\n" {
					mu.Lock()
					fakes++
					mu.Unlock()
				}
			}()
		}
		// Meanwhile the victim is itself, and only itself.
		for range 3 {
			if out := mustExec(t, victim, vb.ID, "cat /workspace/v.txt"); out != "victim-data\n" {
				t.Errorf("victim's exec: got %q, want %q", out, "victim-data\n")
			}
		}
		wg.Wait()
		if fakes == 0 {
			t.Fatal("no exec reached the fake agent: the attack was not exercised")
		}
		rssAfter := rssKiB(t, s.Pid())
		t.Logf("%d of 12 execs answered by the fake agent; server RSS %d -> %d KiB", fakes, rssBefore, rssAfter)
		if rssAfter > rssBefore+64<<10 { // 12 streams cut at 256 KiB each, and noise
			t.Fatalf("server RSS grew from %d to %d KiB against endless lines", rssBefore, rssAfter)
		}
		// The attacker can still stop its own fake.
		eventually(t, 30*time.Second, "the fake agent to stop", func() bool {
			_, err := execOut(ctx, attacker, ab.ID, "sudo pkill -f [f]ake.py; true")
			return err == nil
		})
	})

	t.Run("the host and the victim are untouched", func(t *testing.T) {
		got, err := os.ReadFile(canary)
		st, _ := os.Stat(canary)
		if err != nil || string(got) != "host canary" || !st.ModTime().Equal(canaryStat.ModTime()) || st.Mode() != canaryStat.Mode() {
			t.Fatalf("host canary changed: %q, %v", got, err)
		}
		if entries, _ := os.ReadDir(hostDir); len(entries) != 2 {
			t.Fatalf("host dir has %d entries, want the canary and its socket", len(entries))
		}
		select {
		case <-hits:
			t.Fatal("the host connected to the canary socket")
		default:
		}
		if out := mustExec(t, victim, vb.ID, "cat /workspace/v.txt"); out != "victim-data\n" {
			t.Fatalf("victim: got %q, want %q", out, "victim-data\n")
		}
		if _, err := victim.PauseSandbox(ctx, vb.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := victim.ResumeSandbox(ctx, vb.ID); err != nil {
			t.Fatal(err)
		}
		if out := mustExec(t, victim, vb.ID, "cat /workspace/v.txt"); out != "victim-data\n" {
			t.Fatalf("victim after its own pause: got %q, want %q", out, "victim-data\n")
		}
	})
}

func newClient(t *testing.T, s *testenv.Server, key string) *client.Client {
	t.Helper()
	c, err := client.New(client.WithBaseURL(s.URL), client.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustCreate(t *testing.T, c *client.Client, req api.CreateSandboxRequest) *api.Sandbox {
	t.Helper()
	sb, err := c.CreateSandbox(t.Context(), req)
	if err != nil {
		t.Fatalf("creating sandbox: %v", err)
	}
	t.Cleanup(func() { c.StopSandbox(context.Background(), sb.ID) })
	return sb
}

func execOut(ctx context.Context, c *client.Client, id, shell string) (string, error) {
	res, err := c.Exec(ctx, id, api.ExecRequest{Cmd: api.Command{Shell: shell}}, client.ExecOptions{})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return res.Stdout, fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	return res.Stdout, nil
}

func mustExec(t *testing.T, c *client.Client, id, shell string) string {
	t.Helper()
	out, err := execOut(t.Context(), c, id, shell)
	if err != nil {
		t.Fatalf("exec %q: %v", shell, err)
	}
	return out
}

func eventually(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rssKiB reads a process's resident memory.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
