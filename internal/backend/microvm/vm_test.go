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
func agentSh(t testing.TB, hc *http.Client, cmd string) string {
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
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.cfg.RunDir); err == nil {
		t.Errorf("run dir %s is left after Close", b.cfg.RunDir)
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
			case <-time.After(2 * time.Minute):
				con := inst.(*instance).con.String()
				t.Fatalf("the sandbox did not end; console ends %q", con[max(0, len(con)-1500):])
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

// TestJail: QEMU runs as the sandbox's own user, under seccomp and no new
// privileges, and sees only its tree: no host file, no data dir.
func TestJail(t *testing.T) {
	b := newTestBackend(t)
	const id = "sbx_vmjail01"
	inst, err := b.Start(t.Context(), id, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(context.Background(), id)
	pid := strconv.Itoa(inst.(*instance).pid)
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := recordedUID(b.paths(id), id)
	if err != nil {
		t.Fatal(err)
	}
	uid := strconv.Itoa(recorded)
	for _, want := range []string{"Uid:\t" + uid + "\t" + uid, "NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("QEMU's status lacks %q", want)
		}
	}
	root := "/proc/" + pid + "/root"
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	if want := []string{".done", "boot", "dev", "lib", "lib64", "run", "usr"}; !slices.Equal(names, want) {
		t.Errorf("QEMU's root holds %v, want only %v", names, want)
	}
	for _, p := range []string{"etc/shadow", "var", "tmp", strings.TrimPrefix(b.cfg.DataDir, "/"), strings.TrimPrefix(b.cfg.CacheDir, "/")} {
		if _, err := os.Lstat(root + "/" + p); err == nil {
			t.Errorf("QEMU sees /%s", p)
		}
	}
	if run, _ := os.ReadDir(root + "/run"); len(run) != 3 {
		t.Errorf("QEMU's writable dir holds %d entries, want its 3 sockets", len(run))
	}
}

// TestPauseResume: pause saves memory, processes and disk into the
// checkpoint and ends QEMU; resume brings them back.
func TestPauseResume(t *testing.T) {
	b := newTestBackend(t)
	ctx := t.Context()
	const id = "sbx_vmpause01"
	spec := testSpec()
	inst, err := b.Start(ctx, id, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(context.Background(), id)
	hc := agentClient(inst)
	agentSh(t, hc, "echo kept > /home/user/f; sleep 3600 & echo $! > /tmp/pid; python3 -c 'import time; open(\"/tmp/x\",\"w\").write(str(time.time()))'")
	pid := inst.(*instance).pid
	t0 := time.Now()
	if err := b.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Logf("pause took %s", time.Since(t0))
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Fatal("QEMU still runs after pause")
	}
	if _, ok := b.cg.OOMKills(id); ok {
		t.Error("the cgroup is still there after pause")
	}
	t0 = time.Now()
	inst, err = b.Resume(ctx, id, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resume took %s", time.Since(t0))
	hc = agentClient(inst)
	if got := agentSh(t, hc, "cat /home/user/f; kill -0 $(cat /tmp/pid) && echo alive; test -s /tmp/x && echo tmp"); got != "kept\nalive\ntmp" {
		t.Errorf("after resume: got %q, want the file, the process and /tmp (memory)", got)
	}
}

// TestAttachAfterRestart: a new backend (a restarted server) finds the
// running QEMU and talks to the same guest.
func TestAttachAfterRestart(t *testing.T) {
	b := newTestBackend(t)
	const id = "sbx_vmattach01"
	inst, err := b.Start(t.Context(), id, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(context.Background(), id)
	agentSh(t, agentClient(inst), "echo before > /tmp/mark")
	inst.(*instance).close() // the old server goes away without ending it
	b2, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	inst2, err := b2.Attach(t.Context(), id, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	if got := agentSh(t, agentClient(inst2), "cat /tmp/mark"); got != "before" {
		t.Errorf("after attach: got %q, want the same guest's file", got)
	}
	if err := b2.Destroy(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inst2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the attached instance did not end")
	}
}

// TestFreezeThaw: a frozen VM runs nothing (a counter that ticks every
// 0.1 s stands still) and goes on after a thaw.
func TestFreezeThaw(t *testing.T) {
	b := newTestBackend(t)
	ctx := t.Context()
	const id = "sbx_vmfreeze01"
	inst, err := b.Start(ctx, id, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(context.Background(), id)
	hc := agentClient(inst)
	agentSh(t, hc, "(i=0; while true; do i=$((i+1)); echo $i > /tmp/n; sleep 0.1; done) > /dev/null 2>&1 &")
	time.Sleep(time.Second)
	counter := func() int {
		n, err := strconv.Atoi(agentSh(t, hc, "cat /tmp/n"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// How far it counts in 3 s here (TCG runs it slower than 10 a second).
	first := counter()
	time.Sleep(3 * time.Second)
	before := counter()
	running := before - first
	if running < 6 {
		t.Fatalf("the counter went only from %d to %d in 3 s of running", first, before)
	}
	if err := b.Freeze(ctx, id); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := b.Thaw(ctx, id); err != nil {
		t.Fatal(err)
	}
	thawed := counter()
	if thawed-before > running/2 {
		t.Errorf("the counter went from %d to %d over a 3 s freeze (%d in 3 s running): the guest ran", before, thawed, running)
	}
	time.Sleep(time.Second)
	if after := counter(); after <= thawed {
		t.Errorf("after the thaw the counter stands at %d", after)
	}
}

// TestFailedBootLeavesNothing: a boot that cannot finish (here its time
// runs out at once) kills QEMU and leaves no mount and no cgroup.
func TestFailedBootLeavesNothing(t *testing.T) {
	b := newTestBackend(t)
	const id = "sbx_vmfail01"
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := b.Start(ctx, id, testSpec()); err == nil {
		b.Destroy(context.Background(), id)
		t.Fatal("a boot with no time to finish: got no error")
	}
	p := b.paths(id)
	for _, m := range []string{p.jail, p.jail + "/run", p.jail + "/dev/null"} {
		if mounted(m) {
			t.Errorf("%s is still mounted", m)
		}
	}
	if _, ok := b.cg.OOMKills(id); ok {
		t.Error("the cgroup is still there")
	}
	if pid, ok := b.recordedPid(p, id); ok {
		t.Errorf("QEMU %d still runs", pid)
	}
	b.Destroy(context.Background(), id)

	// QEMU refuses to start (no host has 300 TiB): what it said is in the
	// error, from its bounded output, and nothing is left either.
	const id2 = "sbx_vmfail02"
	spec := testSpec()
	spec.MemoryMiB = 300 << 20
	_, err := b.Start(t.Context(), id2, spec)
	if err == nil {
		b.Destroy(context.Background(), id2)
		t.Fatal("a VM of 300 TiB: got no error")
	}
	if !strings.Contains(err.Error(), "qemu: ") || !strings.Contains(err.Error(), "cannot set up guest memory") {
		t.Errorf("got %q, want QEMU's own message", err)
	}
	if mounted(b.paths(id2).jail) {
		t.Error("the jail is still mounted")
	}
	b.Destroy(context.Background(), id2)
}

func TestLastLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"one\ntwo\n\n", "two"},
		{"x: \x1b[31mred\x00\xff", "x: [31mred"},
		{strings.Repeat("a", 400), strings.Repeat("a", 300)},
	} {
		if got := lastLine(tc.in); got != tc.want {
			t.Errorf("lastLine(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
