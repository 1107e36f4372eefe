package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// fakeProc is a proc file system with a meminfo and processes of the
// given resident sets in MiB.
type fakeProc struct {
	dir    string
	killed []int
}

func newFakeProc(t *testing.T) *fakeProc {
	return &fakeProc{dir: t.TempDir()}
}

func (f *fakeProc) meminfo(t *testing.T, totalMiB, availMiB uint64) {
	t.Helper()
	data := fmt.Sprintf("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nBuffers:        0 kB\n", totalMiB<<10, availMiB<<10, availMiB<<10)
	if err := os.WriteFile(filepath.Join(f.dir, "meminfo"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeProc) process(t *testing.T, pid int, rssMiB uint64, adj string) {
	t.Helper()
	dir := filepath.Join(f.dir, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	status := fmt.Sprintf("Name:\tpython3\nState:\tR (running)\nVmRSS:\t%d kB\nThreads:\t1\n", rssMiB<<10)
	os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644)
	os.WriteFile(filepath.Join(dir, "oom_score_adj"), []byte(adj+"\n"), 0o644)
}

func (f *fakeProc) watch() *OOMWatch {
	return &OOMWatch{Proc: f.dir, Self: 1, kill: func(pid int) error {
		f.killed = append(f.killed, pid)
		return nil
	}}
}

func TestOOMWatchChoosesTheLargest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		availMiB uint64
		procs    map[int]uint64 // pid: RSS in MiB
		exempt   []int
		want     []int
	}{
		{"plenty left", 300, map[int]uint64{2: 10, 3: 200}, nil, nil},
		{"just above the reserve", 97, map[int]uint64{2: 10, 3: 400}, nil, nil},
		{"short: the largest goes", 40, map[int]uint64{2: 10, 3: 400, 4: 60}, nil, []int{3}},
		{"the agent is never chosen", 40, map[int]uint64{1: 450, 4: 60}, nil, []int{4}},
		{"oom_score_adj -1000 is never chosen", 40, map[int]uint64{3: 400, 4: 60}, []int{3}, []int{4}},
		// Memory held by /tmp and /dev/shm: no kill would free it.
		{"only small processes", 10, map[int]uint64{2: 10, 3: 30}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProc(t)
			f.meminfo(t, 512, tc.availMiB)
			for pid, rss := range tc.procs {
				adj := "0"
				if slices.Contains(tc.exempt, pid) {
					adj = "-1000"
				}
				f.process(t, pid, rss, adj)
			}
			f.watch().Check()
			if !slices.Equal(f.killed, tc.want) {
				t.Fatalf("got kills %v, want %v", f.killed, tc.want)
			}
		})
	}
}

func TestOOMWatchWaitsForAKillToFree(t *testing.T) {
	f := newFakeProc(t)
	f.meminfo(t, 512, 40)
	f.process(t, 3, 300, "0")
	f.process(t, 4, 100, "0")
	w := f.watch()
	w.Check()
	// The killed process is still listed and nothing is freed yet: one
	// shortage costs one process.
	w.Check()
	if !slices.Equal(f.killed, []int{3}) {
		t.Fatalf("while the kill settles: got kills %v, want [3]", f.killed)
	}
	// Something else takes more meanwhile: a new shortage.
	f.meminfo(t, 512, 30)
	w.Check()
	if !slices.Equal(f.killed, []int{3, 4}) {
		t.Fatalf("after more was taken: got kills %v, want [3 4]", f.killed)
	}
}

func TestReserve(t *testing.T) {
	for _, tc := range []struct{ totalMiB, wantMiB uint64 }{
		{512, 96},
		{4096, 320},
		{16384, 320},
	} {
		if got := Reserve(tc.totalMiB<<20) >> 20; got != tc.wantMiB {
			t.Errorf("Reserve(%d MiB): got %d MiB, want %d MiB", tc.totalMiB, got, tc.wantMiB)
		}
	}
}

func TestNextLook(t *testing.T) {
	for _, tc := range []struct {
		roomMiB uint64
		cpus    int
		want    time.Duration
	}{
		{0, 1, 10 * time.Millisecond},
		{384, 1, 250 * time.Millisecond},
		{384, 4, 62500 * time.Microsecond},
		{4000, 1, time.Second},
	} {
		if got := nextLook(tc.roomMiB<<20, tc.cpus); got != tc.want {
			t.Errorf("nextLook(%d MiB, %d CPUs): got %s, want %s", tc.roomMiB, tc.cpus, got, tc.want)
		}
	}
}

func TestOOMWatchDistrustsFreshlyFreedMemory(t *testing.T) {
	for _, tc := range []struct {
		name           string
		availMiB, bMiB uint64 // after the kill of the 300 MiB process
		want           []int
	}{
		{"freed inside, the other stays", 200, 100, []int{3}},
		// The host may still hold the killed process's pages: the other
		// took them over.
		{"freed inside, the other grew", 200, 150, []int{3, 4}},
		{"freed past the killed one, the other grew", 400, 150, []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProc(t)
			f.meminfo(t, 512, 40)
			f.process(t, 3, 300, "0")
			f.process(t, 4, 100, "0")
			w := f.watch()
			w.Check()
			f.meminfo(t, 512, tc.availMiB)
			f.process(t, 4, tc.bMiB, "0")
			w.Check()
			if !slices.Equal(f.killed, tc.want) {
				t.Fatalf("got kills %v, want %v", f.killed, tc.want)
			}
		})
	}
}
