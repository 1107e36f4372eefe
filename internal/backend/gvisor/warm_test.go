package gvisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/hostcgroup"
	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestWriteSpecCPUShares checks the spec runsc gets: the lowest shares for
// a warm start, and none (the kernel's default) for any other.
func TestWriteSpecCPUShares(t *testing.T) {
	b := &Backend{agentDir: t.TempDir()}
	spec := sandbox.Spec{VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256}
	for _, tc := range []struct {
		name string
		warm bool
		want *uint64
	}{
		{"cold start", false, nil},
		{"warm start", true, ptr(uint64(2))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pathsIn(t.TempDir())
			if err := b.writeSpec("sbx1", p, "/rootfs", spec, tc.warm); err != nil {
				t.Fatal(err)
			}
			s := readSpec(t, p)
			got := s.Linux.Resources.CPU.Shares
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Fatalf("got shares %v, want %v", deref(got), deref(tc.want))
			}
			// The limits are the same either way.
			if q := s.Linux.Resources.CPU.Quota; q == nil || *q != cpuPeriod {
				t.Errorf("got quota %v, want %d", q, cpuPeriod)
			}
		})
	}
}

// TestWarmStartAndClaim boots a real sandbox warm: its cgroup has the
// lowest CPU priority, its agent answers (and takes the sandbox's env),
// Claim gives it the default priority, and Destroy leaves nothing.
func TestWarmStartAndClaim(t *testing.T) {
	testenv.RequiresGvisor(t)
	layout := hostCgroups()
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id := fmt.Sprintf("sbxwarm%d", os.Getpid())
	spec := sandbox.Spec{Image: image.DefaultName, VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256}
	begun := time.Now()
	inst, err := b.StartWarm(ctx, id, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("StartWarm took %v", time.Since(begun))
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			b.Destroy(context.Background(), id)
		}
	})

	if got, want, _ := cpuPriority(t, layout, id); got != want {
		t.Fatalf("warm: got CPU priority %s, want %s", got, want)
	}

	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return inst.DialAgent(ctx) },
	}}
	defer hc.CloseIdleConnections()
	if out := agentEnv(t, hc, `{"env":{"POOLED":"claimed-by-test"}}`); !strings.Contains(out, "\nPOOLED=claimed-by-test\n") {
		t.Fatalf("got env %q, want POOLED=claimed-by-test from PUT /env", out)
	}

	begun = time.Now()
	if err := b.Claim(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Logf("Claim took %v", time.Since(begun))
	if got, _, want := cpuPriority(t, layout, id); got != want {
		t.Fatalf("claimed: got CPU priority %s, want %s", got, want)
	}
	// Still the same sandbox, answering.
	if out := agentEnv(t, hc, `{"env":{"AFTER":"claim"}}`); !strings.Contains(out, "\nAFTER=claim\n") || strings.Contains(out, "POOLED=") {
		t.Fatalf("after claim: got env %q, want AFTER=claim and no POOLED", out)
	}

	hc.CloseIdleConnections()
	if err := b.Destroy(ctx, id); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	destroyed = true
	if slices.Contains(layout.Leftovers(), id) {
		t.Errorf("a cgroup of %s is left after Destroy", id)
	}
	p := b.paths(id)
	for _, d := range []string{p.state, p.run} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is left after Destroy: %v", d, err)
		}
	}
	if err := b.Claim(ctx, id); err == nil {
		t.Errorf("claiming a destroyed sandbox: got no error, want one")
	}
	if slices.Contains(layout.Leftovers(), id) {
		t.Errorf("a claim after Destroy made a cgroup for %s", id)
	}
}

// TestWarmResume: a sandbox restored from a checkpoint has the default CPU
// priority even if it booted warm; the restore writes its spec anew.
func TestWarmResume(t *testing.T) {
	testenv.RequiresGvisor(t)
	layout := hostCgroups()
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id := fmt.Sprintf("sbxwres%d", os.Getpid())
	t.Cleanup(func() { b.Destroy(context.Background(), id) })
	spec := sandbox.Spec{Image: image.DefaultName, VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256}
	if _, err := b.StartWarm(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
	if err := b.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	inst, err := b.Resume(ctx, id, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, want := cpuPriority(t, layout, id); got != want {
		t.Fatalf("resumed: got CPU priority %s, want %s", got, want)
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return inst.DialAgent(ctx) },
	}}
	defer hc.CloseIdleConnections()
	if out := agentEnv(t, hc, `{"env":{"R":"1"}}`); !strings.Contains(out, "\nR=1\n") {
		t.Fatalf("resumed: got env %q, want R=1", out)
	}
}

// agentEnv sets the sandbox's env with body, then runs `env` in it.
func agentEnv(t *testing.T, hc *http.Client, body string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "PUT", "http://agent/env", strings.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("PUT /env: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT /env: got %d, want 204", resp.StatusCode)
	}
	return agentExec(t, hc, "env")
}

// agentExec runs argv through the agent's /exec and returns "\n" and its
// standard output.
func agentExec(t *testing.T, hc *http.Client, argv ...string) string {
	t.Helper()
	exec, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Argv: argv}})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://agent/exec", bytes.NewReader(exec))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST /exec: %v", err)
	}
	defer resp.Body.Close()
	out := "\n"
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("decoding %q: %v", sc.Bytes(), err)
		}
		if ev.Type == api.EventStdout {
			s, err := ev.Output()
			if err != nil {
				t.Fatal(err)
			}
			out += s
		}
	}
	return out
}

// cpuPriority reads the sandbox's CPU priority as the layout keeps it.
// cpuPriority is the sandbox's CPU priority with what it reads warm and
// normal.
func cpuPriority(t *testing.T, layout hostcgroup.Layout, id string) (got, warm, normal string) {
	t.Helper()
	switch layout.(type) {
	case hostcgroup.V1, hostcgroup.V2:
	default:
		t.Skipf("no cgroups on this host (%T)", layout)
	}
	got, warm, normal, err := hostcgroup.CPUPriority(layout, id)
	if err != nil {
		t.Fatal(err)
	}
	return got, warm, normal
}

// pathsIn is a sandbox's paths under dir, for tests that write no more
// than a spec.
func pathsIn(dir string) paths {
	return paths{bundle: filepath.Join(dir, "bundle"), sock: filepath.Join(dir, "sock"), run: dir}
}

func readSpec(t *testing.T, p paths) specs.Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func deref(p *uint64) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// warmProbe prints the shell's own pid, the pids of every process (a
// builtin glob: it starts none) and what the places a user writes to
// hold, with any bytecode written since the image was made.
const warmProbe = `echo "self $$"; for d in /proc/[0-9]*; do echo "pid ${d#/proc/}"; done; ` +
	`find /tmp /var/tmp /workspace /home /root /dev/shm -mindepth 1 | sort; find /usr/lib /usr/local/lib -name '*.pyc' -newer /etc/os-release | head -5`

// TestWarmCachesLeaveNothing boots one sandbox cold and one warm: the warm
// one's warm-up ran (its first command is not the sandbox's first
// process) and left nothing behind: no process beyond the agent, the same
// files as the cold one, no bytecode written.
func TestWarmCachesLeaveNothing(t *testing.T) {
	testenv.RequiresGvisor(t)
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Image: image.DefaultName, VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256}
	probe := func(name string, start func(context.Context, string, sandbox.Spec) (sandbox.Instance, error)) (self string, others, files []string) {
		id := fmt.Sprintf("sbx%s%d", name, os.Getpid())
		defer b.Destroy(context.Background(), id)
		inst, err := start(t.Context(), id, spec)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return inst.DialAgent(ctx) },
		}}
		defer hc.CloseIdleConnections()
		for _, line := range strings.Split(strings.TrimSpace(agentShell(t, hc, warmProbe)), "\n") {
			switch {
			case strings.HasPrefix(line, "self "):
				self = strings.TrimPrefix(line, "self ")
			case strings.HasPrefix(line, "pid "):
				if p := strings.TrimPrefix(line, "pid "); p != "1" {
					others = append(others, p)
				}
			default:
				files = append(files, line)
			}
		}
		return self, others, files
	}
	coldSelf, coldOthers, coldFiles := probe("cold", b.Start)
	warmSelf, warmOthers, warmFiles := probe("warm", b.StartWarm)
	if coldSelf == warmSelf {
		t.Errorf("the first command of the warm sandbox has pid %s, as in a cold one: the warm-up did not run", warmSelf)
	}
	for _, tc := range []struct {
		name   string
		self   string
		others []string
	}{{"cold", coldSelf, coldOthers}, {"warm", warmSelf, warmOthers}} {
		if !slices.Equal(tc.others, []string{tc.self}) {
			t.Errorf("%s: got processes %v beside the agent, want only the probe's own %s", tc.name, tc.others, tc.self)
		}
	}
	if !slices.Equal(warmFiles, coldFiles) {
		t.Errorf("warm sandbox: got files %q, want those of a cold one %q", warmFiles, coldFiles)
	}
}

// agentShell runs a shell command through the agent and returns its stdout.
func agentShell(t *testing.T, hc *http.Client, script string) string {
	t.Helper()
	exec, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Shell: script}})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://agent/exec", bytes.NewReader(exec))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST /exec: %v", err)
	}
	defer resp.Body.Close()
	var out string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("decoding %q: %v", sc.Bytes(), err)
		}
		if ev.Type == api.EventStdout {
			s, err := ev.Output()
			if err != nil {
				t.Fatal(err)
			}
			out += s
		}
	}
	return out
}
