package gvisor

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/hostcgroup"
	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/testenv"
)

func TestHardLimit(t *testing.T) {
	for _, tc := range []struct {
		vcpus, mib int
		want       uint64
	}{
		{1, 512, (512 + 128) << 20},
		{2, 4096, (4096 + 256) << 20},
		// Half the size at most: 8 vCPUs of 512 MiB would get 1 GiB.
		{8, 512, (512 + 256) << 20},
		{0, 1024, (1024 + 128) << 20},
	} {
		if got := hardLimit(sandbox.Spec{VCPUs: tc.vcpus, MemoryMiB: tc.mib}); got != tc.want {
			t.Errorf("%d vCPUs, %d MiB: got %d MiB, want %d MiB", tc.vcpus, tc.mib, got>>20, tc.want>>20)
		}
	}
}

func TestOverWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	feed := func(w *overWatch, from, to, every int, held uint64) (endedAt int) {
		for ms := from; ms <= to; ms += every {
			if w.over(held, t0.Add(time.Duration(ms)*time.Millisecond)) {
				return ms
			}
		}
		return -1
	}
	t.Run("over without a break ends after the grace", func(t *testing.T) {
		w := overWatch{size: 100, grace: time.Second}
		if got := feed(&w, 0, 5000, 250, 150); got != 1000 {
			t.Fatalf("ended at %d ms, want 1000", got)
		}
	})
	t.Run("at the size is not over", func(t *testing.T) {
		w := overWatch{size: 100, grace: time.Second}
		if got := feed(&w, 0, 5000, 250, 100); got != -1 {
			t.Fatalf("ended at %d ms, want never", got)
		}
	})
	t.Run("a short excess drains away", func(t *testing.T) {
		// A killed program's memory leaves the host within 2 s: about 1 s
		// over in every 4 s, again and again, never ends it.
		w := overWatch{size: 100, grace: 2 * time.Second}
		for start := 0; start < 60000; start += 4000 {
			if got := feed(&w, start, start+750, 250, 150); got != -1 {
				t.Fatalf("ended at %d ms, want never", got)
			}
			if got := feed(&w, start+1000, start+3750, 250, 50); got != -1 {
				t.Fatalf("ended at %d ms under the size", got)
			}
		}
	})
	t.Run("dipping under now and then does not keep the headroom", func(t *testing.T) {
		// Over for 3.75 s, one reading under, again: the old rule (one
		// reading under starts the count anew) never ended this.
		w := overWatch{size: 100, grace: 4 * time.Second}
		ended := -1
		for start := 0; start < 60000 && ended < 0; start += 4000 {
			if ended = feed(&w, start, start+3750, 250, 150); ended < 0 {
				w.over(50, t0.Add(time.Duration(start+4000-1)*time.Millisecond))
			}
		}
		if ended < 0 || ended > 10000 {
			t.Fatalf("ended at %d ms, want within 10 s", ended)
		}
	})
}

// TestMemoryHeadroom boots a real sandbox: its kernel sees its size, and
// once it answers the host's limit is the size and the headroom.
func TestMemoryHeadroom(t *testing.T) {
	testenv.RequiresGvisor(t)
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("sbxmem%d", os.Getpid())
	spec := sandbox.Spec{Image: image.DefaultName, VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256}
	inst, err := b.Start(t.Context(), id, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Destroy(context.Background(), id) })
	var limitFile string
	switch l := hostCgroups().(type) {
	case hostcgroup.V1:
		limitFile, err = l.File(id, "memory", "memory.limit_in_bytes")
	case hostcgroup.V2:
		limitFile, err = l.File(id, "memory", "memory.max")
	default:
		t.Fatal("no cgroups on this host: runsc limits nothing")
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(limitFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(data)); got != strconv.FormatUint(hardLimit(spec), 10) {
		t.Fatalf("%s: got %s, want %d (%d MiB)", limitFile, got, hardLimit(spec), hardLimit(spec)>>20)
	}
	held, err := hostCgroups().MemoryHeld(id)
	if err != nil || held == 0 || held > 512<<20 {
		t.Fatalf("memoryHeld of an idle sandbox: got %d MiB, %v", held>>20, err)
	}
	t.Logf("an idle sandbox of 512 MiB holds %d MiB on the host", held>>20)
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return inst.DialAgent(ctx) },
	}}
	defer hc.CloseIdleConnections()
	if out := agentExec(t, hc, "grep", "MemTotal", "/proc/meminfo"); !strings.Contains(out, " 524288 kB") {
		t.Fatalf("inside: got %q, want MemTotal of 512 MiB, the size and not the hard limit", out)
	}

	// The host's OOM killer takes a program's stub before the sentry.
	sentry, err := readPid(b.paths(id).pidFile)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * overLook)
	pids, err := hostCgroups().Procs(id)
	if err != nil {
		t.Fatal(err)
	}
	stubs := 0
	for _, pid := range pids {
		adj := adjOf(t, "/proc", pid)
		switch {
		case pid == sentry && adj != "0":
			t.Errorf("the sentry: got oom_score_adj %s, want 0", adj)
		case adj == strconv.Itoa(stubOOMScoreAdj):
			stubs++
		}
	}
	if stubs != len(pids)-2 {
		t.Fatalf("%d of the cgroup's %d processes are marked stubs, want all but the sentry and the gofer", stubs, len(pids))
	}
}

// fakeProc is a proc file system with a stat, a cgroup and an
// oom_score_adj per pid: parents[pid] is its parent, and every pid but
// those of outside is in the cgroup /withruntime/sbxtest.
func fakeProc(t *testing.T, parents map[int]int, outside ...int) string {
	t.Helper()
	dir := t.TempDir()
	for pid, ppid := range parents {
		d := filepath.Join(dir, strconv.Itoa(pid))
		os.MkdirAll(d, 0o755)
		// A command name with a space and a parenthesis, as a program
		// may choose.
		stat := fmt.Sprintf("%d (a b) c) S %d %d 0 0 -1\n", pid, ppid, pid)
		os.WriteFile(filepath.Join(d, "stat"), []byte(stat), 0o644)
		os.WriteFile(filepath.Join(d, "oom_score_adj"), []byte("0\n"), 0o644)
		group := "/withruntime/sbxtest"
		if slices.Contains(outside, pid) {
			group = "/system.slice/sshd.service"
		}
		os.WriteFile(filepath.Join(d, "cgroup"), []byte("12:pids:"+group+"\n4:memory:"+group+"\n0::/\n"), 0o644)
	}
	return dir
}

func adjOf(t *testing.T, proc string, pid int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "oom_score_adj"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func TestOOMOrderMarksStubsOnly(t *testing.T) {
	// 10 the gofer and 11 the sentry (parents outside the cgroup), 12 and
	// 13 stubs of the sentry, 14 a stub's child.
	// 16 is a host process that took the pid of a stub gone since the
	// listing.
	proc := fakeProc(t, map[int]int{10: 1, 11: 9, 12: 11, 13: 11, 14: 13, 15: 11, 16: 11}, 16)
	o := oomOrder{proc: proc, group: cgroupPath("sbxtest")}
	o.update([]int{10, 11, 12, 13, 14})
	want := map[int]string{10: "0", 11: "0", 12: "500", 13: "500", 14: "500", 15: "0"}
	for pid, adj := range want {
		if got := adjOf(t, proc, pid); got != adj {
			t.Errorf("pid %d: got oom_score_adj %s, want %s", pid, got, adj)
		}
	}
	// Marked once: a stub whose mark was changed since is left alone, and
	// a new one (15) is marked.
	os.WriteFile(filepath.Join(proc, "12", "oom_score_adj"), []byte("7"), 0o644)
	o.update([]int{10, 11, 12, 15})
	if got := adjOf(t, proc, 12); got != "7" {
		t.Errorf("a stub seen before: got %s, want it left at 7", got)
	}
	if got := adjOf(t, proc, 15); got != "500" {
		t.Errorf("a new stub: got %s, want 500", got)
	}
	// A pid gone from the cgroup is forgotten: back, it is looked at anew.
	o.update([]int{10, 11, 15})
	o.update([]int{10, 11, 12, 15})
	if got := adjOf(t, proc, 12); got != "500" {
		t.Errorf("a pid back in the cgroup: got %s, want 500", got)
	}
	// A process gone between the list and the look is no error.
	o.update([]int{10, 11, 99})
	// A process outside the sandbox's cgroup is never marked, whatever
	// its parent.
	o.update([]int{10, 11, 16})
	if got := adjOf(t, proc, 16); got != "0" {
		t.Errorf("a host process with a listed pid: got oom_score_adj %s, want it left at 0", got)
	}
}
