package cluster_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// hookStore runs a hook once, before the first call it watches, as if
// another process acted between the control's reads.
type hookStore struct {
	store.Store
	once       sync.Once
	onList     func() // before the first ListSandboxes of a node
	onGetNodes int    // GetNode calls to pass before onGetNode runs
	onGetNode  func()
	getNodes   int
}

func (h *hookStore) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Record, error) {
	if f.Node != "" && h.onList != nil {
		h.once.Do(h.onList)
	}
	return h.Store.ListSandboxes(ctx, f)
}

func (h *hookStore) GetNode(ctx context.Context, id string) (*store.Node, error) {
	n, err := h.Store.GetNode(ctx, id)
	h.getNodes++
	if h.onGetNode != nil && h.getNodes == h.onGetNodes {
		h.once.Do(h.onGetNode)
	}
	return n, err
}

// lostAt registers node id once per epoch up to epochs, the last with a
// lease that runs out at once, and marks that one lost.
func lostAt(t *testing.T, st store.Store, n *fakeNode, epochs int, markLost bool) {
	t.Helper()
	for range epochs - 1 {
		register(t, st, n, nodeOpts{})
	}
	register(t, st, n, nodeOpts{ttl: 50 * time.Millisecond, lost: markLost})
}

func epochRecord(t *testing.T, st store.Store, id, node string, epoch int64) *sandbox.Record {
	t.Helper()
	r := putRecord(t, st, id, node, sandbox.StateStarting, nil)
	r.NodeEpoch, r.State = epoch, sandbox.StateRunning
	if err := st.PutSandbox(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func stateOf(t *testing.T, st store.Store, id string) sandbox.State {
	t.Helper()
	r, err := st.GetSandbox(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

// TestDetectorKeepsLaterEpochs: the detector that gave up on a node's
// epoch ends the records of that epoch and older (0: before epochs), not
// those of a later registration, nor any once the node came back.
func TestDetectorKeepsLaterEpochs(t *testing.T) {
	t.Run("records of a later epoch", func(t *testing.T) {
		st := storetest.OpenBolt(t)
		ca := mustAuthority(t)
		n := startNode(t, ca, st, "back")
		lostAt(t, st, n, 2, true) // lost at epoch 2
		old := epochRecord(t, st, "sb-old", "back", 0)
		same := epochRecord(t, st, "sb-same", "back", 2)
		later := epochRecord(t, st, "sb-later", "back", 3)
		c := newControl(t, st, ca, nil, time.Hour)
		c.DetectOnce(t.Context())
		for id, want := range map[string]sandbox.State{old.ID: sandbox.StateEnded, same.ID: sandbox.StateEnded, later.ID: sandbox.StateRunning} {
			if got := stateOf(t, st, id); got != want {
				t.Errorf("%s: got %s, want %s", id, got, want)
			}
		}
	})
	t.Run("node registered again during the pass", func(t *testing.T) {
		db := storetest.OpenBolt(t)
		ca := mustAuthority(t)
		n := startNode(t, ca, db, "back")
		lostAt(t, db, n, 1, true)
		old := epochRecord(t, db, "sb-old", "back", 1)
		st := &hookStore{Store: db}
		// The node comes back after the detector listed it as lost, and
		// its old sandbox is still its own (the node ends it itself).
		st.onList = func() { register(t, db, n, nodeOpts{}) }
		c := newControl(t, st, ca, nil, time.Hour)
		c.DetectOnce(t.Context())
		if got := stateOf(t, db, old.ID); got != sandbox.StateRunning {
			t.Errorf("%s: got %s, want running (its node came back)", old.ID, got)
		}
	})
}

// TestStopOnLostNodeKeepsLaterEpochs: a stop of a sandbox whose node is
// gone ends it node_lost only if it is of the registration found gone and
// that registration is still the node's.
func TestStopOnLostNodeKeepsLaterEpochs(t *testing.T) {
	t.Run("record of a later epoch", func(t *testing.T) {
		st := storetest.OpenBolt(t)
		ca := mustAuthority(t)
		n := startNode(t, ca, st, "back")
		lostAt(t, st, n, 1, false)
		later := epochRecord(t, st, "sb-later", "back", 2)
		c := newControl(t, st, ca, nil, 0)
		if _, err := c.Stop(t.Context(), "acct", later.ID); sandbox.KindOf(err) != sandbox.KindConflict || !strings.Contains(err.Error(), "moved on") {
			t.Errorf("got %v, want conflict: ... moved on ...", err)
		}
		if got := stateOf(t, st, later.ID); got != sandbox.StateRunning {
			t.Errorf("got %s, want running", got)
		}
		old := epochRecord(t, st, "sb-old", "back", 1)
		if rec, err := c.Stop(t.Context(), "acct", old.ID); err != nil || rec.EndReason != sandbox.EndNodeLost {
			t.Errorf("record of the gone epoch: got %+v, %v; want ended node_lost", rec, err)
		}
	})
	t.Run("node registered again during the stop", func(t *testing.T) {
		db := storetest.OpenBolt(t)
		ca := mustAuthority(t)
		n := startNode(t, ca, db, "back")
		lostAt(t, db, n, 1, false)
		old := epochRecord(t, db, "sb-old", "back", 1)
		st := &hookStore{Store: db, onGetNodes: 1}
		st.onGetNode = func() { register(t, db, n, nodeOpts{}) }
		c := newControl(t, st, ca, nil, 0)
		if _, err := c.Stop(t.Context(), "acct", old.ID); sandbox.KindOf(err) != sandbox.KindConflict {
			t.Errorf("got %v, want conflict", err)
		}
		if got := stateOf(t, db, old.ID); got != sandbox.StateRunning {
			t.Errorf("got %s, want running (its node came back)", got)
		}
	})
}

// TestDetectorPausesAnInterruptedSharedResume: a node lost in the middle of
// resuming a shared checkpoint leaves the checkpoint whole in the shared
// storage, so the sandbox is paused again, not ended; a create it was
// starting, or a resume of a checkpoint on its own disk, ends node_lost.
func TestDetectorPausesAnInterruptedSharedResume(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	n := startNode(t, ca, st, "mid")
	lostAt(t, st, n, 1, true)
	shared := &sandbox.Checkpoint{Shared: true, Compat: "c1"}
	resuming := putRecord(t, st, "sb-resuming", "mid", sandbox.StatePaused, shared)
	resuming.State, resuming.NodeEpoch = sandbox.StateStarting, 1 // a resume's starting record keeps PausedAt
	if err := st.PutSandbox(t.Context(), resuming); err != nil {
		t.Fatal(err)
	}
	local := putRecord(t, st, "sb-local", "mid", sandbox.StatePaused, nil)
	local.State, local.NodeEpoch = sandbox.StateStarting, 1
	if err := st.PutSandbox(t.Context(), local); err != nil {
		t.Fatal(err)
	}
	creating := putRecord(t, st, "sb-creating", "mid", sandbox.StateStarting, shared)
	c := newControl(t, st, ca, nil, time.Hour)
	c.DetectOnce(t.Context())
	for id, want := range map[string]sandbox.State{resuming.ID: sandbox.StatePaused, local.ID: sandbox.StateEnded, creating.ID: sandbox.StateEnded} {
		if got := stateOf(t, st, id); got != want {
			t.Errorf("%s: got %s, want %s", id, got, want)
		}
	}
	// Paused as it was before the resume began, billed as it was.
	if r, err := st.GetSandbox(t.Context(), resuming.ID); err != nil || r.PausedAt == nil || r.Usage.CostNanos != 12345 {
		t.Errorf("paused again: got %+v, %v; want PausedAt kept and usage unchanged", r, err)
	}
}
