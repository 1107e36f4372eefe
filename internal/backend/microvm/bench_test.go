package microvm

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// Figures of the microVM tier under TCG on this host (the only
// accelerator here): go test -run '^$' -bench . ./internal/backend/microvm/
// They print medians and p90s; nothing is asserted about speed.

func newBenchBackend(b *testing.B) *Backend {
	testenv.RequiresMicroVM(b)
	be, err := New(Config{DataDir: b.TempDir(), CacheDir: testenv.CacheDir(), Accel: "tcg"})
	if err != nil {
		b.Fatal(err)
	}
	return be
}

func report(b *testing.B, name string, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	b.ReportMetric(float64(d[len(d)/2].Milliseconds()), name+"-p50-ms")
	b.ReportMetric(float64(d[len(d)*9/10].Milliseconds()), name+"-p90-ms")
}

// BenchmarkBoot: create to the first command's answer, the exec round
// trip of `true`, and what an idle VM holds on the host.
func BenchmarkBoot(b *testing.B) {
	be := newBenchBackend(b)
	var boots, execs []time.Duration
	var held []uint64
	for n := 0; n < b.N; n++ {
		id := fmt.Sprintf("sbx_vmbench%02d", n)
		start := time.Now()
		inst, err := be.Start(context.Background(), id, testSpec())
		if err != nil {
			b.Fatal(err)
		}
		hc := agentClient(inst)
		agentSh(b, hc, "true")
		boots = append(boots, time.Since(start))
		for range 10 {
			t0 := time.Now()
			agentSh(b, hc, "true")
			execs = append(execs, time.Since(t0))
		}
		time.Sleep(3 * time.Second)
		if m, err := be.cg.MemoryHeld(id); err == nil {
			held = append(held, m)
		}
		be.Destroy(context.Background(), id)
	}
	report(b, "create-first-cmd", boots)
	report(b, "exec-true", execs)
	if len(held) > 0 {
		sort.Slice(held, func(i, j int) bool { return held[i] < held[j] })
		b.ReportMetric(float64(held[len(held)/2]>>20), "idle-host-MiB")
	}
}

// BenchmarkPauseResume: pause (the machine into a file) and resume of a
// 512 MiB VM.
func BenchmarkPauseResume(b *testing.B) {
	be := newBenchBackend(b)
	const id = "sbx_vmbenchpr"
	spec := testSpec()
	if _, err := be.Start(context.Background(), id, spec); err != nil {
		b.Fatal(err)
	}
	defer be.Destroy(context.Background(), id)
	var pauses, resumes []time.Duration
	for n := 0; n < b.N; n++ {
		t0 := time.Now()
		if err := be.Pause(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		pauses = append(pauses, time.Since(t0))
		t0 = time.Now()
		if _, err := be.Resume(context.Background(), id, spec); err != nil {
			b.Fatal(err)
		}
		resumes = append(resumes, time.Since(t0))
	}
	report(b, "pause", pauses)
	report(b, "resume", resumes)
}
