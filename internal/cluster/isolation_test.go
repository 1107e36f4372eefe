package cluster_test

import (
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// A create goes only to a node that runs its isolation; each fake node
// refuses another as a manager does (not_supported), so a create sent to
// the wrong node fails the test.
func TestPlacementByIsolation(t *testing.T) {
	gv, vm := []string{sandbox.IsolationGVisor}, []string{sandbox.IsolationGVisor, sandbox.IsolationMicroVM}
	type node struct {
		isolations []string
		vcpus      int  // reported load, of 8 CPUs
		gone       bool // its lease ran out
	}
	tests := []struct {
		name      string
		a, b      node // a before b on a tie
		isolation string
		wantOn    string
		wantKind  sandbox.Kind
		wantMsg   string
	}{
		{"microvm passes over an emptier gvisor-only node", node{gv, 0, false}, node{vm, 4, false}, sandbox.IsolationMicroVM, "b", "", ""},
		{"a node from before isolations runs gvisor only", node{nil, 0, false}, node{vm, 4, false}, sandbox.IsolationMicroVM, "b", "", ""},
		{"microvm-only passes over an emptier node", node{gv, 0, false}, node{[]string{sandbox.IsolationMicroVM}, 4, false}, sandbox.IsolationMicroVM, "b", "", ""},
		{"microvm with no room by the reports asks a node that runs it", node{gv, 0, false}, node{vm, 8, false}, sandbox.IsolationMicroVM, "b", "", ""},
		{"gvisor passes over an emptier microvm-only node", node{[]string{sandbox.IsolationMicroVM}, 0, false}, node{gv, 4, false}, sandbox.IsolationGVisor, "b", "", ""},
		{"gvisor goes to the emptier of two that run it (a)", node{gv, 0, false}, node{vm, 4, false}, sandbox.IsolationGVisor, "a", "", ""},
		{"gvisor goes to the emptier of two that run it (b)", node{gv, 4, false}, node{vm, 0, false}, sandbox.IsolationGVisor, "b", "", ""},
		{"no isolation goes to any node", node{[]string{sandbox.IsolationMicroVM}, 0, false}, node{gv, 4, false}, "", "a", "", ""},
		{"microvm with its only node gone", node{gv, 0, false}, node{vm, 0, true}, sandbox.IsolationMicroVM, "", sandbox.KindNotSupported,
			"isolation microvm is run by no node of this cluster"},
		{"an unknown isolation", node{gv, 0, false}, node{vm, 0, false}, "bogus", "", sandbox.KindInvalid,
			`isolation must be "gvisor" or "microvm", got "bogus"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := storetest.OpenBolt(t)
			ca := mustAuthority(t)
			a, b := startNode(t, ca, st, "a"), startNode(t, ca, st, "b")
			register(t, st, a, nodeOpts{isolations: tt.a.isolations, load: store.NodeLoad{VCPUs: tt.a.vcpus}})
			bo := nodeOpts{isolations: tt.b.isolations, load: store.NodeLoad{VCPUs: tt.b.vcpus}}
			if tt.b.gone {
				bo.ttl = 50 * time.Millisecond
			}
			register(t, st, b, bo)
			c := newControl(t, st, ca, nil, 0)
			rec, err := c.Create(t.Context(), "acct", "key", service.CreateRequest{VCPUs: 2, Isolation: tt.isolation})
			if tt.wantKind != "" {
				if k := sandbox.KindOf(err); k != tt.wantKind || sandbox.MessageOf(err) != tt.wantMsg {
					t.Errorf("got %v, want %s: %s", err, tt.wantKind, tt.wantMsg)
				}
				for _, n := range []*fakeNode{a, b} {
					if creates, _ := n.counts(); creates != 0 {
						t.Errorf("node %s was sent %d creates, want none", n.id, creates)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if rec.Node != tt.wantOn {
				t.Errorf("placed on %s, want %s", rec.Node, tt.wantOn)
			}
			other := map[string]*fakeNode{"a": b, "b": a}[tt.wantOn]
			if creates, _ := other.counts(); creates != 0 {
				t.Errorf("node %s was sent %d creates, want none", other.id, creates)
			}
		})
	}
}

// A shared checkpoint resumes only on a node that runs its isolation.
func TestResumeByIsolation(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	gone, gv, vm := startNode(t, ca, st, "gone"), startNode(t, ca, st, "gv"), startNode(t, ca, st, "vm")
	register(t, st, gone, nodeOpts{ttl: 50 * time.Millisecond, compat: "c", shared: true, isolations: []string{sandbox.IsolationMicroVM}})
	register(t, st, gv, nodeOpts{compat: "c", shared: true}) // from before isolations: gvisor only
	register(t, st, vm, nodeOpts{compat: "c", shared: true, isolations: []string{sandbox.IsolationMicroVM}, load: store.NodeLoad{VCPUs: 6}})
	c := newControl(t, st, ca, nil, 0)
	rec := putRecord(t, st, "sb-vm", "gone", sandbox.StatePaused, &sandbox.Checkpoint{Shared: true, Compat: "c"})
	rec.Spec.Isolation = sandbox.IsolationMicroVM
	if err := st.PutSandbox(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	got, err := c.Resume(t.Context(), "acct", rec.ID)
	if err != nil || got.Node != "vm" {
		t.Fatalf("resume of a microvm checkpoint: got %+v, %v; want it on node vm", got, err)
	}
	if _, ops := gv.counts(); len(ops) != 0 {
		t.Errorf("gvisor-only node was asked %q, want nothing", ops)
	}
}
