package microvm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/testenv"
)

// These tests boot real microVMs under TCG (software emulation: this
// host's KVM boots no stock kernel), sharing the cache's kernel, image
// disk and jail tree.

func newTestBackend(t *testing.T) *Backend {
	t.Helper()
	testenv.RequiresMicroVM(t)
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), Accel: "tcg"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testSpec() sandbox.Spec {
	return sandbox.Spec{VCPUs: 1, MemoryMiB: 512, DiskMiB: 256, PidsLimit: 256}
}

func agentClient(inst sandbox.Instance) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return inst.DialAgent(ctx) },
		DisableKeepAlives: true,
	}}
}

// agentSh runs a shell command through the agent and returns its stdout.
func agentSh(t *testing.T, hc *http.Client, cmd string) string {
	t.Helper()
	body, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Shell: cmd}})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://agent/exec", bytes.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	defer resp.Body.Close()
	var out strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("decoding %q: %v", sc.Bytes(), err)
		}
		if ev.Type == api.EventStdout {
			s, _ := ev.Output()
			out.WriteString(s)
		}
	}
	return strings.TrimSpace(out.String())
}

// TestOwnKernel: the guest runs its own kernel (not the host's), as root
// with the image's user, sized as asked, and Destroy leaves nothing.
func TestOwnKernel(t *testing.T) {
	b := newTestBackend(t)
	ctx := t.Context()
	const id = "sbx_vmkernel01"
	inst, err := b.Start(ctx, id, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(context.Background(), id)
	hc := agentClient(inst)
	var host unixName
	host.read(t)
	if got := agentSh(t, hc, "uname -r"); got == "" || got == host.release {
		t.Errorf("guest kernel %q: want one of its own (host %q)", got, host.release)
	} else if _, version, _ := currentKernel(b.cfg.CacheDir); !strings.HasPrefix(version, got) {
		t.Errorf("guest kernel %q: want the cache's %s", got, version)
	}
	got := strings.Fields(agentSh(t, hc, "nproc; awk '/MemTotal/{print int($2/1024)}' /proc/meminfo; id -un; sudo -n id -u"))
	if len(got) != 4 || got[0] != "1" || got[2] != "user" || got[3] != "0" {
		t.Errorf("nproc, MemTotal MiB, user, sudo's uid: got %q, want 1, about 512, user, 0", got)
	} else if mib, _ := strconv.Atoi(got[1]); mib < 400 || mib > 512 {
		t.Errorf("MemTotal %d MiB: want the VM's 512 less the kernel's own", mib)
	}
	if got := agentSh(t, hc, "echo hi > /home/user/f && cat /home/user/f"); got != "hi" {
		t.Errorf("writing the disk: got %q", got)
	}
	p := b.paths(id)
	pid := inst.(*instance).pid
	if err := b.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + itoa(pid)); err == nil {
		t.Errorf("QEMU %d is still there", pid)
	}
	for _, d := range []string{p.run, p.state} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s is left", d)
		}
	}
	if mounted(p.jail) {
		t.Errorf("jail %s is still mounted", p.jail)
	}
	if l := b.cg.Leftovers(); slices.Contains(l, id) {
		t.Errorf("cgroup left: %v", l)
	}
}

// TestGuestCrash: a kernel panic ends the sandbox with reason error, and
// killing QEMU mid-command does too; each leaves nothing once destroyed.
func TestGuestCrash(t *testing.T) {
	b := newTestBackend(t)
	for _, tc := range []struct{ name, cmd string }{
		{"panic", "echo c | sudo tee /proc/sysrq-trigger"},
		{"qemu killed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "sbx_vmcrash" + strings.ReplaceAll(tc.name, " ", "")
			inst, err := b.Start(t.Context(), id, testSpec())
			if err != nil {
				t.Fatal(err)
			}
			defer b.Destroy(context.Background(), id)
			hc := agentClient(inst)
			// The command's own call fails as the machine goes: not checked.
			run := func(cmd string) {
				body, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Shell: cmd}})
				if resp, err := hc.Post("http://agent/exec", "application/json", bytes.NewReader(body)); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					t.Logf("exec answered %s: %s", resp.Status, b)
				}
			}
			if tc.cmd != "" {
				go run(tc.cmd)
			} else {
				go run("sleep 600")
				time.Sleep(500 * time.Millisecond)
				killPid(inst.(*instance).pid)
			}
			select {
			case <-inst.Done():
			case <-time.After(60 * time.Second):
				t.Fatal("the sandbox did not end")
			}
			if reason, msg := inst.Cause(); reason != sandbox.EndError {
				t.Errorf("got reason %s (%s), want %s", reason, msg, sandbox.EndError)
			} else {
				t.Logf("reason %s: %s", reason, msg)
			}
		})
	}
}

type unixName struct{ release string }

func (u *unixName) read(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	u.release = strings.TrimSpace(string(data))
}

func itoa(n int) string { return strconv.Itoa(n) }
