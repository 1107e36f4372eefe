package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// parseSize reads a size as "sandbox top" prints it (512B, 1.5MiB).
func parseSize(t *testing.T, s string) float64 {
	t.Helper()
	units := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		t.Fatalf("size %q", s)
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	u, ok := units[s[i:]]
	if err != nil || !ok {
		t.Fatalf("size %q", s)
	}
	return n * u
}

// TestSandboxTop runs "withruntime sandbox top" against a sandbox that
// spins a CPU and holds 300 MiB: off a terminal (a line per refresh, and
// --json), and on a real terminal (tmux) whose screen it redraws.
func TestSandboxTop(t *testing.T) {
	s := testenv.StartServer(t)
	env := s.Env()
	c, err := client.New(client.WithBaseURL(s.URL), client.WithAPIKey(s.Key))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.CreateSandbox(t.Context(), api.CreateSandboxRequest{VCPUs: 2, MemoryMiB: 1024, TimeoutSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopSandbox(t.Context(), sb.ID) })
	if _, err := c.StartProcess(t.Context(), sb.ID, api.ExecRequest{
		Cmd:        api.Command{Argv: []string{"python3", "-c", "b = bytearray(300 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass"}},
		Background: true,
	}); err != nil {
		t.Fatal(err)
	}
	// Wait until the server's newest sample shows the spinning CPU and the
	// memory, so that what top shows next can be held to it.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ms, err := c.SandboxMetrics(t.Context(), sb.ID, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(ms); n > 0 && ms[n-1].CPUUsedPct >= 30 && ms[n-1].MemUsed >= 300<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sample shows the spinning CPU and 300 MiB: %+v", ms)
		}
		time.Sleep(time.Second)
	}

	t.Run("lines", func(t *testing.T) {
		start := time.Now()
		out, errs, code := cli(t, env, "sandbox", "top", "-n", "2", sb.ID)
		if code != 0 {
			t.Fatalf("top -n 2: exit %d: %s", code, errs)
		}
		if d := time.Since(start); d < 4*time.Second || d > 30*time.Second {
			t.Errorf("two refreshes took %s, want about 5 s", d)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("top -n 2 printed %d lines, want 2:\n%s", len(lines), out)
		}
		var times []time.Time
		for _, line := range lines {
			f := map[string]string{}
			fields := strings.Fields(line)
			for _, kv := range fields[1:] {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			ts, err := time.Parse(time.RFC3339, fields[0])
			if err != nil {
				t.Fatalf("line %q: time: %v", line, err)
			}
			times = append(times, ts)
			pct, err := strconv.ParseFloat(strings.TrimSuffix(f["cpu"], "%"), 64)
			if err != nil || pct < 30 || pct > 100 {
				t.Errorf("line %q: cpu %q, want the spinning CPU (30 to 100%%)", line, f["cpu"])
			}
			if f["cpus"] != "2" {
				t.Errorf("line %q: cpus %q, want 2", line, f["cpus"])
			}
			used, total, _ := strings.Cut(f["mem"], "/")
			if u, tot := parseSize(t, used), parseSize(t, total); u < 300<<20 || u > tot || tot > 1100<<20 {
				t.Errorf("line %q: memory %s of %s, want at least 300 MiB of about 1 GiB", line, used, total)
			}
			used, total, _ = strings.Cut(f["disk"], "/")
			if u, tot := parseSize(t, used), parseSize(t, total); u < 0 || tot <= 0 || u > tot {
				t.Errorf("line %q: disk %s of %s", line, used, total)
			}
			if !strings.HasSuffix(f["rx"], "/s") || !strings.HasSuffix(f["tx"], "/s") {
				t.Errorf("line %q: no network rates", line)
			}
			if age, err := time.ParseDuration(f["age"]); err != nil || age <= 0 || age > 5*time.Minute {
				t.Errorf("line %q: age %q", line, f["age"])
			}
		}
		if !times[1].After(times[0]) {
			t.Errorf("the second refresh shows the sample of %s, the first %s: want a newer one", times[1], times[0])
		}
	})

	t.Run("json", func(t *testing.T) {
		out, errs, code := cli(t, env, "sandbox", "top", "--json", "-n", "1", sb.ID)
		if code != 0 {
			t.Fatalf("top --json: exit %d: %s", code, errs)
		}
		var ms []api.SandboxMetric
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			var m api.SandboxMetric
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			ms = append(ms, m)
		}
		if len(ms) < 2 {
			t.Fatalf("top --json -n 1 printed %d samples, want every sample kept (2 or more by now)", len(ms))
		}
		last := ms[len(ms)-1]
		if last.CPUCount != 2 || last.CPUUsedPct < 30 || last.MemUsed < 300<<20 || !last.Timestamp.After(ms[0].Timestamp) {
			t.Errorf("samples %+v", ms)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		if _, err := exec.LookPath("tmux"); err != nil {
			t.Fatal("tmux is not installed (scripts/test.sh installs it)")
		}
		codeFile := filepath.Join(t.TempDir(), "code")
		p := &tmuxPane{t: t, socket: fmt.Sprintf("wr-top-%d", os.Getpid()), env: append(env, "TERM=xterm-256color")}
		// The shell traps SIGINT, so that Ctrl-C ends only top and the
		// shell lives on to write its exit code.
		line := fmt.Sprintf("trap : INT; %s sandbox top %s; echo $? > %s; sleep 600", testenv.CLI(t), sb.ID, codeFile)
		p.tmux("new-session", "-d", "-s", "pty", "-x", "100", "-y", "30", "sh", "-c", line)
		t.Cleanup(func() { exec.Command("tmux", "-L", p.socket, "kill-server").Run() })
		p.tmux("set-option", "-g", "status", "off")
		screen := regexp.MustCompile(`(?m)^sandbox ` + regexp.QuoteMeta(sb.ID) + ` +running +age \S+ +sampled (\S+).*\n\n` +
			`CPU +\[(#*)(-*)\] +(\d+\.\d)% of 2 CPUs\n` +
			`MEM +\[#*-*\] +(\S+) / (\S+)\n` +
			`DISK +\[#*-*\] +\S+ / \S+\n` +
			`NET +rx \S+/s +tx \S+/s`)
		m := p.wait(screen, 30*time.Second)
		if pct, _ := strconv.ParseFloat(m[4], 64); pct < 30 || len(m[2]) == 0 || len(m[2])+len(m[3]) < 10 {
			t.Errorf("the CPU line shows %s%% with a bar of %d of %d: want the spinning CPU", m[4], len(m[2]), len(m[2])+len(m[3]))
		}
		if used := parseSize(t, m[5]); used < 300<<20 || used > parseSize(t, m[6]) {
			t.Errorf("memory %s of %s, want at least 300 MiB", m[5], m[6])
		}
		// It redraws: the same screen with a newer sample, not a second
		// copy below the first.
		first := m[1]
		deadline := time.Now().Add(20 * time.Second)
		for {
			all := p.tmux("capture-pane", "-p", "-J", "-t", "pty")
			if n := strings.Count(all, "CPU "); n != 1 {
				t.Fatalf("the pane shows %d CPU lines, want the one redrawn:\n%s", n, all)
			}
			if m := screen.FindStringSubmatch(all); m != nil && m[1] != first {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the screen was not redrawn with a newer sample in 20 s:\n%s", all)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Ctrl-C ends it with the shell's code for SIGINT.
		p.keys("C-c")
		deadline = time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(codeFile)
			if code := strings.TrimSpace(string(b)); code != "" {
				if code != "130" {
					t.Errorf("top ended by Ctrl-C: exit %s, want 130", code)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("top did not end on Ctrl-C")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	// A sandbox that ends ends its top, which says so.
	t.Run("ended", func(t *testing.T) {
		cmd := exec.Command(testenv.CLI(t), "sandbox", "top", sb.ID)
		cmd.Env = env
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		time.Sleep(2 * time.Second)
		if _, err := c.StopSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("top went on after the sandbox ended: %s", out.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(errb.String(), "has ended (stopped)") {
			t.Errorf("top of an ended sandbox: exit %d, stderr %q; want 1 saying it ended", code, errb.String())
		}
		if n := strings.Count(out.String(), "\n"); n < 1 {
			t.Errorf("top printed %d lines before the end, want one at least", n)
		}
	})
}
