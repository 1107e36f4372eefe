package cluster_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

func TestDetector(t *testing.T) {
	t.Run("bolt", func(t *testing.T) { testDetector(t, storetest.OpenBolt(t)) })
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("WITHRUNTIME_TEST_POSTGRES")
		if url == "" {
			if os.Getenv("CI") == "true" {
				t.Fatal("WITHRUNTIME_TEST_POSTGRES is not set")
			}
			t.Skip("WITHRUNTIME_TEST_POSTGRES is not set")
		}
		st := openPostgres(t, url)
		testDetector(t, st)
	})
}

// testDetector runs two controls' detectors on one store, as two API
// servers do, against a node whose lease runs out.
func testDetector(t *testing.T, st store.Store) {
	ctx := t.Context()
	ca := mustAuthority(t)
	dying := startNode(t, ca, st, "dying")
	healthy := startNode(t, ca, st, "healthy")
	register(t, st, healthy, nodeOpts{})
	// A lease long enough to create the records under it.
	e := &store.Node{ID: dying.id, Addr: dying.addr, CPUs: 8, MemoryMiB: 32768, Overcommit: 1}
	if err := st.RegisterNode(ctx, e, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	shared := &sandbox.Checkpoint{Shared: true, Compat: "c"}
	running := putRecord(t, st, "sb-running", "dying", sandbox.StateRunning, nil)
	starting := putRecord(t, st, "sb-starting", "dying", sandbox.StateStarting, nil)
	pausedLocal := putRecord(t, st, "sb-paused-local", "dying", sandbox.StatePaused, nil)
	pausedShared := putRecord(t, st, "sb-paused-shared", "dying", sandbox.StatePaused, shared)
	elsewhere := putRecord(t, st, "sb-elsewhere", "healthy", sandbox.StateRunning, nil)

	logs := &logBuffer{}
	dctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		c := newControl(t, st, ca, logs, 100*time.Millisecond)
		wg.Go(func() { c.RunDetector(dctx) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := st.GetSandbox(ctx, pausedLocal.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.State == sandbox.StateEnded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the detector did not end the lost node's sandboxes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A few more passes, which must change nothing.
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()

	n, err := st.GetNode(ctx, "dying")
	if err != nil || !n.Lost {
		t.Errorf("dying node: got %+v, %v; want lost", n, err)
	}
	if n, err := st.GetNode(ctx, "healthy"); err != nil || n.Lost {
		t.Errorf("healthy node: got %+v, %v; want not lost", n, err)
	}
	if got := logs.count("node lost: its lease ran out"); got != 1 {
		t.Errorf("node lost logged %d times by two detectors, want once", got)
	}
	if got := logs.count("sandbox ended: its node is lost"); got != 3 {
		t.Errorf("sandbox ends logged %d times, want 3", got)
	}
	for _, want := range []struct {
		rec   *sandbox.Record
		state sandbox.State
	}{
		{running, sandbox.StateEnded},
		{starting, sandbox.StateEnded},
		{pausedLocal, sandbox.StateEnded},
		{pausedShared, sandbox.StatePaused},
		{elsewhere, sandbox.StateRunning},
	} {
		got, err := st.GetSandbox(ctx, want.rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != want.state {
			t.Errorf("%s: got %s, want %s", got.ID, got.State, want.state)
		}
		if got.Usage != want.rec.Usage {
			t.Errorf("%s: usage got %+v, want it unchanged %+v", got.ID, got.Usage, want.rec.Usage)
		}
		if want.state != sandbox.StateEnded {
			continue
		}
		if got.EndReason != sandbox.EndNodeLost || got.EndedAt == nil {
			t.Errorf("%s: got end %s at %v, want node_lost with an end time", got.ID, got.EndReason, got.EndedAt)
		}
	}
	rows, err := st.Usage(ctx, store.UsageFilter{})
	if err != nil || len(rows) != 0 {
		t.Errorf("usage ledger: got %v, %v; want nothing billed", rows, err)
	}
}
