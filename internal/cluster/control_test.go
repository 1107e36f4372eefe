package cluster_test

import (
	"bufio"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

func TestPlacementSpreadsByLoad(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	a := startNode(t, ca, st, "a") // half its CPUs taken
	b := startNode(t, ca, st, "b") // empty
	full := startNode(t, ca, st, "c")
	expired := startNode(t, ca, st, "d")
	lost := startNode(t, ca, st, "e")
	register(t, st, a, nodeOpts{load: store.NodeLoad{Sandboxes: 2, VCPUs: 4, MemoryMiB: 8192}})
	register(t, st, b, nodeOpts{})
	register(t, st, full, nodeOpts{load: store.NodeLoad{Sandboxes: 4, VCPUs: 8, MemoryMiB: 16384}})
	register(t, st, expired, nodeOpts{ttl: 50 * time.Millisecond})
	register(t, st, lost, nodeOpts{ttl: 50 * time.Millisecond, lost: true})
	c := newControl(t, st, ca, nil, 0)

	// 2 vCPUs and 4096 MiB each (the default size) on 8 CPUs: b fills to
	// a's load, then the two take turns, a first on ties (by id), until
	// both are full.
	var got []string
	for range 6 {
		rec, err := c.Create(t.Context(), "acct", "key", service.CreateRequest{})
		if err != nil {
			t.Fatalf("create %d: %v", len(got)+1, err)
		}
		got = append(got, rec.Node)
	}
	if want := []string{"b", "b", "a", "b", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("placements: got %v, want %v", got, want)
	}
	// With no room anywhere by the reports, the least loaded live node (a,
	// on a tie by id) is asked once, and says it has none.
	for _, n := range []*fakeNode{a, b, full} {
		n.refuse = sandbox.KindCapacityExhausted
	}
	_, err := c.Create(t.Context(), "acct", "key", service.CreateRequest{})
	if k := sandbox.KindOf(err); k != sandbox.KindCapacityExhausted || !strings.Contains(err.Error(), "no node has room") {
		t.Errorf("create on full nodes: got %v, want capacity_exhausted: no node has room", err)
	}
	for n, want := range map[*fakeNode]int{a: 3, b: 4, full: 0, expired: 0, lost: 0} {
		if creates, _ := n.counts(); creates != want {
			t.Errorf("node %s was sent %d creates, want %d", n.id, creates, want)
		}
	}
	// What Get and List read is the store's, with the node.
	recs, err := c.List(t.Context(), "acct")
	if err != nil || len(recs) != 6 || recs[0].Node == "" {
		t.Errorf("list: got %d records, %v; want 6 with their node", len(recs), err)
	}
	if _, err := c.Get(t.Context(), "other", recs[0].ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another account's sandbox: got %v, want not_found", err)
	}
}

func TestCreateRetries(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := closed.Addr().String()
	closed.Close()

	tests := []struct {
		name string
		// first is the least loaded node, second the next.
		setup        func(first, second *fakeNode, o, o2 *nodeOpts)
		wantKind     sandbox.Kind
		wantMsg      string
		wantOn       string // the node whose record comes back
		firstCreates int
		nextCreates  int
	}{
		{"capacity exhausted goes to the next", func(f, _ *fakeNode, _, _ *nodeOpts) { f.refuse = sandbox.KindCapacityExhausted }, "", "", "second", 1, 1},
		{"refused dial goes to the next", func(_, _ *fakeNode, o, _ *nodeOpts) { o.addr = refusing }, "", "", "second", 0, 1},
		{"dropped connection is not retried", func(f, _ *fakeNode, _, _ *nodeOpts) { f.drop = true }, sandbox.KindInternal, "the sandbox may exist", "", 1, 0},
		{"another refusal is the answer", func(f, _ *fakeNode, _, _ *nodeOpts) { f.refuse = sandbox.KindConcurrency }, sandbox.KindConcurrency, "refused by first", "", 1, 0},
		{"both full", func(f, s *fakeNode, _, _ *nodeOpts) {
			f.refuse, s.refuse = sandbox.KindCapacityExhausted, sandbox.KindCapacityExhausted
		}, sandbox.KindCapacityExhausted, "no node has room", "", 1, 1},
		{"no room by the reports: the least loaded checks the request", func(f, _ *fakeNode, o, o2 *nodeOpts) {
			o.load, o2.load, f.refuse = store.NodeLoad{VCPUs: 8}, store.NodeLoad{VCPUs: 8}, sandbox.KindInvalid
		}, sandbox.KindInvalid, "refused by first", "", 1, 0},
		{"no room by the reports nor in fact", func(f, _ *fakeNode, o, o2 *nodeOpts) {
			o.load, o2.load, f.refuse = store.NodeLoad{VCPUs: 8}, store.NodeLoad{VCPUs: 8}, sandbox.KindCapacityExhausted
		}, sandbox.KindCapacityExhausted, "no node has room", "", 1, 0},
		{"no room by the reports but in fact", func(_, _ *fakeNode, o, o2 *nodeOpts) {
			o.load, o2.load = store.NodeLoad{VCPUs: 8}, store.NodeLoad{VCPUs: 8}
		}, "", "", "first", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := storetest.OpenBolt(t)
			ca := mustAuthority(t)
			first, second := startNode(t, ca, st, "first"), startNode(t, ca, st, "second")
			o, o2 := nodeOpts{}, nodeOpts{load: store.NodeLoad{VCPUs: 1}}
			tt.setup(first, second, &o, &o2)
			register(t, st, first, o)
			register(t, st, second, o2)
			c := newControl(t, st, ca, nil, 0)
			rec, err := c.Create(t.Context(), "acct", "key", service.CreateRequest{})
			if tt.wantKind != "" {
				if k := sandbox.KindOf(err); k != tt.wantKind || !strings.Contains(sandbox.MessageOf(err), tt.wantMsg) {
					t.Errorf("got %v, want %s: ...%s...", err, tt.wantKind, tt.wantMsg)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tt.wantOn != "" && rec.Node != tt.wantOn {
				t.Errorf("placed on %s, want %s", rec.Node, tt.wantOn)
			}
			if got, _ := first.counts(); got != tt.firstCreates {
				t.Errorf("creates sent to the first node: got %d, want %d", got, tt.firstCreates)
			}
			if got, _ := second.counts(); got != tt.nextCreates {
				t.Errorf("creates sent to the second node: got %d, want %d", got, tt.nextCreates)
			}
		})
	}
}

func TestNoNode(t *testing.T) {
	st := storetest.OpenBolt(t)
	c := newControl(t, st, mustAuthority(t), nil, 0)
	_, err := c.Create(t.Context(), "acct", "key", service.CreateRequest{})
	if k := sandbox.KindOf(err); k != sandbox.KindCapacityExhausted {
		t.Errorf("got %v, want capacity_exhausted", err)
	}
}

// putRecord stores a record of acct on node.
func putRecord(t *testing.T, st store.Store, id, node string, state sandbox.State, cp *sandbox.Checkpoint) *sandbox.Record {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	r := &sandbox.Record{
		ID: id, Account: "acct", Node: node, State: state, CreatedAt: now, LeaseEndsAt: now.Add(time.Hour),
		Spec:       sandbox.Spec{VCPUs: 2, MemoryMiB: 4096},
		Usage:      sandbox.Usage{AliveMs: 5000, CostNanos: 12345, SampledAt: now},
		Checkpoint: cp,
	}
	if state == sandbox.StatePaused {
		r.PausedAt = &now
	}
	if err := st.PutSandbox(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCallsOnLostNodes(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	live := startNode(t, ca, st, "live")
	gone := startNode(t, ca, st, "gone")
	other := startNode(t, ca, st, "other") // live, but cannot restore gone's checkpoints
	busy := startNode(t, ca, st, "busy")   // could, but has no room
	busy.refuse = sandbox.KindCapacityExhausted
	register(t, st, busy, nodeOpts{compat: "runsc-1 avx", shared: true})
	register(t, st, live, nodeOpts{compat: "runsc-1 avx", shared: true})
	register(t, st, other, nodeOpts{compat: "runsc-2 avx", shared: true})
	register(t, st, gone, nodeOpts{ttl: 50 * time.Millisecond, compat: "runsc-1 avx", shared: true})
	c := newControl(t, st, ca, nil, 0)
	ctx := t.Context()
	shared := &sandbox.Checkpoint{Shared: true, Compat: "runsc-1 avx"}

	onLive := putRecord(t, st, "sb-live", "live", sandbox.StateRunning, nil)
	running := putRecord(t, st, "sb-running", "gone", sandbox.StateRunning, nil)
	resumable := putRecord(t, st, "sb-resumable", "gone", sandbox.StatePaused, shared)
	stoppable := putRecord(t, st, "sb-stoppable", "gone", sandbox.StatePaused, shared)

	// The node is only expired, not yet declared lost: calls refuse, and
	// a stop ends the record at once.
	if _, err := c.Pause(ctx, "acct", running.ID); sandbox.KindOf(err) != sandbox.KindConflict || !strings.Contains(err.Error(), "is lost") {
		t.Errorf("pause on a lost node: got %v, want conflict: the node ... is lost", err)
	}
	if _, err := c.Agent(ctx, "acct", running.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("agent on a lost node: got %v, want conflict", err)
	}
	rec, err := c.Stop(ctx, "acct", running.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != sandbox.StateEnded || rec.EndReason != sandbox.EndNodeLost || rec.EndedAt == nil || rec.Usage != running.Usage {
		t.Errorf("stop on a lost node: got %s/%s ended %v usage %+v; want ended node_lost, usage %+v", rec.State, rec.EndReason, rec.EndedAt, rec.Usage, running.Usage)
	}
	if stored, _ := st.GetSandbox(ctx, running.ID); stored.State != sandbox.StateEnded || stored.EndReason != sandbox.EndNodeLost {
		t.Errorf("stored: got %s/%s, want ended node_lost", stored.State, stored.EndReason)
	}
	// A shared checkpoint resumes, and stops, on a compatible live node.
	if rec, err := c.Resume(ctx, "acct", resumable.ID); err != nil || rec.Node != "live" {
		t.Errorf("resume of a shared checkpoint: got %+v, %v; want it on node live", rec, err)
	}
	if rec, err := c.Stop(ctx, "acct", stoppable.ID); err != nil || rec.EndReason != sandbox.EndStopped {
		t.Errorf("stop of a shared checkpoint: got %+v, %v; want stopped by a live node", rec, err)
	}
	// Calls about a sandbox on a live node go to that node.
	if _, err := c.Stop(ctx, "acct", onLive.ID); err != nil {
		t.Fatal(err)
	}
	_, ops := live.counts()
	if want := []string{"resume sb-resumable", "stop sb-stoppable", "stop sb-live"}; !slices.Equal(ops, want) {
		t.Errorf("live node was asked %q, want %q", ops, want)
	}
	_, ops = busy.counts()
	if want := []string{"resume sb-resumable", "stop sb-stoppable"}; !slices.Equal(ops, want) {
		t.Errorf("busy node was asked %q, want %q (and then the next node)", ops, want)
	}
	for _, n := range []*fakeNode{gone, other} {
		if _, ops := n.counts(); len(ops) != 0 {
			t.Errorf("node %s was asked %q, want nothing", n.id, ops)
		}
	}
}

func TestAgentStreams(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	n := startNode(t, ca, st, "n1")
	n.release = make(chan struct{})
	register(t, st, n, nodeOpts{})
	c := newControl(t, st, ca, nil, 0)
	running := putRecord(t, st, "sb1", "n1", sandbox.StateRunning, nil)
	paused := putRecord(t, st, "sb2", "n1", sandbox.StatePaused, nil)

	if _, err := c.Agent(t.Context(), "acct", paused.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("agent of a paused sandbox: got %v, want conflict", err)
	}
	if _, err := c.Agent(t.Context(), "someone", running.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("agent of another account's sandbox: got %v, want not_found", err)
	}
	rt, err := c.Agent(t.Context(), "acct", running.ID)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://sandbox-agent/exec?timeout=5", strings.NewReader(`{"cmd":"echo hi"}`))
	req.Header.Set("Authorization", "Bearer wr_secret")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	first, err := lines.ReadString('\n')
	if err != nil || !strings.Contains(first, `"stdout"`) {
		t.Fatalf("first line: got %q, %v", first, err)
	}
	// The first line came while the node still holds the last: nothing
	// was buffered on the way.
	close(n.release)
	last, err := lines.ReadString('\n')
	if err != nil || !strings.Contains(last, `"exit"`) {
		t.Fatalf("last line: got %q, %v", last, err)
	}
	_, ops := n.counts()
	if want := `agent sb1 /exec?timeout=5 account=acct auth=""`; !slices.Contains(ops, want) {
		t.Errorf("node saw %q, want %q", ops, want)
	}
}

// TestAgentAutoResumes: the agent of a paused sandbox created to resume on
// use is reached after a resume on its node; one without it is refused.
func TestAgentAutoResumes(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	n := startNode(t, ca, st, "n1")
	register(t, st, n, nodeOpts{})
	c := newControl(t, st, ca, nil, 0)
	wakes := putRecord(t, st, "sb1", "n1", sandbox.StatePaused, nil)
	wakes.Spec.AutoResume = true
	if err := st.PutSandbox(t.Context(), wakes); err != nil {
		t.Fatal(err)
	}
	sleeps := putRecord(t, st, "sb2", "n1", sandbox.StatePaused, nil)
	if _, err := c.Agent(t.Context(), "acct", sleeps.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("agent of a paused sandbox without auto_resume: got %v, want conflict", err)
	}
	if _, err := c.Agent(t.Context(), "acct", wakes.ID); err != nil {
		t.Fatalf("agent of a paused sandbox with auto_resume: %v", err)
	}
	if rec, _ := st.GetSandbox(t.Context(), wakes.ID); rec.State != sandbox.StateRunning {
		t.Errorf("after the call: got %s, want running", rec.State)
	}
	_, ops := n.counts()
	if want := []string{"resume sb1"}; !slices.Equal(ops, want) {
		t.Errorf("node was asked %q, want %q", ops, want)
	}
}
